import { useEffect, useState } from "preact/hooks";
import { all, API, type App } from "../api";
import { Link } from "../router";
import { ErrorNote, useTitle } from "../ui";

// The app list at /apps: the apps the person administers (GET
// /api/v1/apps), each with its state and address and a link to its pages;
// "New app" says how apps are made (svc launch, or the API).

export function AppList() {
  useTitle("Apps");
  const [items, setItems] = useState<App[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [showNew, setShowNew] = useState(false);
  useEffect(() => {
    all<App>("/apps")
      .then((v) => setItems(v.sort((a, b) => a.name.localeCompare(b.name))))
      .catch(setError);
  }, []);
  return (
    <div class="app-list">
      <div class="toolbar">
        <h1>Apps</h1>
        <button type="button" class="primary" aria-expanded={showNew} aria-controls="new-app" onClick={() => setShowNew(!showNew)}>
          New app
        </button>
      </div>
      {showNew && (
        <div id="new-app" class="panel">
          <NewApp />
        </div>
      )}
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

function NewApp() {
  return (
    <>
      <p>Launch an app from a directory of source with the command-line client; it uploads the source, detects how to run it and deploys it:</p>
      <pre>
        <code>svc launch ./my-app</code>
      </pre>
      <p>
        Or through the API: <code>POST /api/v1/apps</code>, then upload the source (<code>POST /api/v1/apps/&#123;appID&#125;/source</code>) and
        accept detection's proposal. The reference is at <a href={API + "/reference"}>/api/v1/reference</a>.
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
