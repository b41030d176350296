// A stylesheet imported with ?url: Vite emits it as a built file of its
// own and the import is its address (terminal-screen.ts links it).
declare module "*.css?url" {
  const url: string;
  export default url;
}
