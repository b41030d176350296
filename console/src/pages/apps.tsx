import { useEffect, useState } from "preact/hooks";
import { all, type App } from "../api";
import { Link } from "../router";
import { ErrorNote, useTitle } from "../ui";

// The app list at /apps: the apps the person administers (GET
// /api/v1/apps), each with its state and address and a link to its pages;
// "New app" leads to the new-app page (/new); the CLI's way is named too.

export function AppList() {
  useTitle("Apps");
  const [items, setItems] = useState<App[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    all<App>("/apps")
      .then((v) => setItems(v.sort((a, b) => a.name.localeCompare(b.name))))
      .catch(setError);
  }, []);
  return (
    <div class="app-list">
      <div class="toolbar">
        <h1>Apps</h1>
        <Link href="/new" class="button primary">
          New app
        </Link>
      </div>
      <p class="muted small cli-hint">
        Or from a terminal: <code>svc launch ./my-app</code>
      </p>
      <ErrorNote error={error} />
      {items === null ? (
        <table class="list" aria-busy="true">
          <caption class="visually-hidden">Loading apps…</caption>
          <tbody>
            {Array.from({ length: 4 }, (_, i) => (
              <tr key={i} class="skeleton-row" aria-hidden="true">
                <td colSpan={4} />
              </tr>
            ))}
          </tbody>
        </table>
      ) : items.length === 0 ? (
        <div class="empty-state">
          <h2>No apps to manage yet</h2>
          <p>Apps you create, and apps others let you manage, are listed here.</p>
          <NewApp />
        </div>
      ) : (
        <table class="list">
          <caption class="visually-hidden">Apps you manage</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Slug</th>
              <th scope="col">State</th>
              <th scope="col">Address</th>
            </tr>
          </thead>
          <tbody>
            {items.map((a) => (
              <tr key={a.id} data-app={a.id}>
                <td>
                  <Link href={"/apps/" + a.id}>{a.name}</Link>
                </td>
                <td>
                  <code>{a.slug}</code>
                </td>
                <td>
                  <StateBadge state={a.state} />
                </td>
                <td>{a.url ? <a href={a.url}>{a.url}</a> : <span class="muted">none yet</span>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

/** NewApp says how to make an app: the new-app page, or the CLI. */
function NewApp() {
  return (
    <>
      <p>
        <Link href="/new" class="button primary">
          Create an app
        </Link>
      </p>
      <p class="small">
        From a git repository or an uploaded archive. Or from a terminal, which uploads, accepts and deploys in one go: <code>svc launch ./my-app</code>
      </p>
    </>
  );
}

/** StateBadge shows an app's or a deploy's state, coloured by kind. */
export function StateBadge(props: { state: string }) {
  const s = props.state;
  const kind = ["running", "succeeded", "passing"].includes(s)
    ? "ok"
    : ["failed", "rejected", "failing", "crashed"].includes(s)
      ? "bad"
      : ["waiting_approval", "deploying", "building", "queued", "restarting", "starting"].includes(s)
        ? "busy"
        : "plain";
  return <span class={"pill pill-" + kind}>{s.replace(/_/g, " ")}</span>;
}
