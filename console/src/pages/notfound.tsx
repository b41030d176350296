/** NotFound is a console address that names no page. */
export function NotFound() {
  return (
    <section class="narrow">
      <h1>No such page</h1>
      <p class="lead">The console has no page at {location.pathname}.</p>
      <p>
        <a href="/">Go to your apps</a>
      </p>
    </section>
  );
}
