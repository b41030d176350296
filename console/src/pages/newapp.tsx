// The new-app page, /new: create an app from a repository or an uploaded
// archive, then on to its detection page.

export function NewApp() {
  return <p class="lead">Not built yet.</p>;
}
