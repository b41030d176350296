import { API } from "../api";

/** Later stands for pages a later version of the console fills. */
export function Later(props: { title: string; what: string }) {
  return (
    <section class="narrow">
      <h1>{props.title}</h1>
      <p class="lead">{props.what} are not in the console yet.</p>
      <p>
        Everything the console will show is in the API already: see <a href={API + "/reference"}>the reference</a>, or use the command-line
        client (<code>svc --help</code>).
      </p>
    </section>
  );
}

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
