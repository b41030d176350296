export default function Home() {
  return <main>Storefront</main>;
}
