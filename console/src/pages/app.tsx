import { bytes } from "../ui";
import { Fragment, type ComponentChildren, type FunctionComponent } from "preact";
import { useCallback, useEffect, useState } from "preact/hooks";
import { call, seg, type App, type Status, type Usage, type WorkloadUsage } from "../api";
import { Link } from "../router";
import { Confirm, ErrorNote, ProblemNote, usePoll, useTitle } from "../ui";
import { StateBadge } from "./apps";
import { Deploys } from "./deploys";
import { Detection } from "./detection";
import { Events } from "./events";
import { StoppedBecause } from "./idle";
import { Logs } from "./logs";
import { Plan } from "./plan";
import { Secrets } from "./secrets";
import { ScoreBadge, Security } from "./security";
import { Settings } from "./settings";
import { Sharing } from "./sharing";
import { Slots } from "./slots";
import { Specs } from "./specs";
import { Terminal } from "./terminal";
import { Volumes } from "./volumes";

// An app's pages, /apps/<app ID>/…: a header (name, slug, state, address)
// and a tab per page. The app is read every few seconds
// (GET /api/v1/apps/{appID}) and again after an action changes it.

/** AppPageProps is what every app page is given: the app (null until
 * read), the path after its tab, and a call to read the app again. */
export interface AppPageProps {
  appID: string;
  app: App | null;
  /** verbs are the person's verbs on the app, host policy applied (null
   * until read): what to offer them. The API still decides. */
  verbs: string[] | null;
  rest: string[];
  onChanged: () => Promise<void>;
}

const tabs: { sub: string; label: string; page?: FunctionComponent<AppPageProps> }[] = [
  { sub: "", label: "Overview" },
  { sub: "deploys", label: "Deploys" },
  { sub: "logs", label: "Logs" },
  { sub: "spec", label: "Spec", page: Specs },
  { sub: "plan", label: "Plan", page: Plan },
  { sub: "detection", label: "Detection", page: Detection },
  { sub: "secrets", label: "Secrets", page: Secrets },
  { sub: "security", label: "Security", page: Security },
  { sub: "slots", label: "Slots", page: Slots },
  { sub: "volumes", label: "Volumes", page: Volumes },
  { sub: "sharing", label: "Sharing", page: Sharing },
  { sub: "events", label: "Events", page: Events },
  { sub: "terminal", label: "Terminal", page: Terminal },
  { sub: "settings", label: "Settings", page: Settings },
];

export function AppPages(props: { appID: string; rest: string[] }) {
  const { appID, rest } = props;
  const [app, setApp] = useState<App | null>(null);
  const [verbs, setVerbs] = useState<string[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const reload = useCallback(async () => {
    try {
      const a = await call<{ app: App; verbs?: string[] }>("GET", "/apps/" + seg(appID));
      setApp(a.app);
      setVerbs(a.verbs ?? []);
      setError(null);
    } catch (e) {
      setError(e);
    }
  }, [appID]);
  // Read again every few seconds: a deploy or the reconciler changes the
  // app's state behind the page.
  useEffect(() => {
    setApp(null);
    setVerbs(null);
  }, [appID]);
  usePoll(reload, 5000, [reload]);
  const tab = rest[0] ?? "";
  const found = tabs.find((t) => t.sub === tab);
  const label = found?.label;
  useTitle((app ? app.name : "App") + (tab && label ? " · " + label : ""));
  let page: ComponentChildren;
  if (tab === "") page = <Overview app={app} appID={appID} onChanged={reload} />;
  else if (tab === "deploys") page = <Deploys appID={appID} depID={rest[1] ?? ""} onChanged={reload} />;
  else if (tab === "logs") page = <Logs appID={appID} />;
  else if (found?.page) {
    const P = found.page;
    page = <P appID={appID} app={app} verbs={verbs} rest={rest.slice(1)} onChanged={reload} />;
  }
  else page = <p class="lead">This app has no page “{tab}”.</p>;
  return (
    <div class="app-page">
      <div class="app-head">
        <p class="crumb">
          <Link href="/apps">Apps</Link> <span aria-hidden="true">/</span>
        </p>
        <h1>{app ? app.name : <span class="skeleton-text">Loading…</span>}</h1>
        <p class="app-facts">
          {app ? (
            <>
              <code>{app.slug}</code>
              <StateBadge state={app.state} />
              {app.url ? (
                <a href={app.url} class="open-link">
                  Open {app.url}
                </a>
              ) : (
                <span class="muted">No address yet: deploy the app to give it one.</span>
              )}
              <ScoreBadge appID={appID} />
            </>
          ) : (
            <span class="muted">&nbsp;</span>
          )}
        </p>
      </div>
      <ErrorNote error={error} />
      <nav class="tabs" aria-label="App pages">
        <ul>
          {tabs.map((t) => (
            <li key={t.sub}>
              <Link href={"/apps/" + appID + (t.sub ? "/" + t.sub : "")} aria-current={t.sub === tab ? "page" : undefined}>
                {t.label}
              </Link>
            </li>
          ))}
        </ul>
      </nav>
      {page}
    </div>
  );
}

type Action = "start" | "stop" | "restart";

const actions: Record<Action, { label: string; title: string; says: string }> = {
  start: { label: "Start", title: "Start the app?", says: "Its workloads start again from the release it last ran." },
  stop: { label: "Stop", title: "Stop the app?", says: "Its workloads stop and its address answers that the app is stopped, until it is started." },
  restart: { label: "Restart", title: "Restart the app?", says: "Each workload restarts in place; nothing else changes. The app is unreachable for a moment." },
};

/** Overview: status per workload, usage against limits, start/stop/restart. */
function Overview(props: { app: App | null; appID: string; onChanged: () => Promise<void> }) {
  const { appID } = props;
  const [status, setStatus] = useState<Status | null>(null);
  const [usage, setUsage] = useState<Usage | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [asking, setAsking] = useState<Action | null>(null);
  const [busy, setBusy] = useState(false);
  const load = useCallback(async () => {
    try {
      const [s, u] = await Promise.all([call<Status>("GET", "/apps/" + seg(appID) + "/status"), call<Usage>("GET", "/apps/" + seg(appID) + "/usage")]);
      setStatus(s);
      setUsage(u);
    } catch (e) {
      setError(e);
    }
  }, [appID]);
  usePoll(load, 3000, [load]);
  const act = async (a: Action) => {
    setAsking(null);
    setBusy(true);
    setError(null);
    try {
      await call("POST", "/apps/" + seg(appID) + "/" + a);
      await Promise.all([props.onChanged(), load()]);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const desired = status?.desired_state ?? props.app?.desired_state;
  const workloads = Object.entries(status?.workloads ?? {}).sort(([a, x], [b, y]) => Number(y.primary) - Number(x.primary) || a.localeCompare(b));
  return (
    <div class="overview">
      <div class="actions" role="group" aria-label="Run the app">
        <button type="button" disabled={busy || desired === "running"} onClick={() => setAsking("start")}>
          Start
        </button>
        <button type="button" disabled={busy || desired === "stopped"} onClick={() => setAsking("stop")}>
          Stop
        </button>
        <button type="button" disabled={busy || status?.state !== "running"} onClick={() => setAsking("restart")}>
          Restart
        </button>
        <span class="muted" aria-live="polite">
          {busy ? "Asking…" : desired ? "Meant to be " + desired : ""}
        </span>
      </div>
      {asking && props.app && (
        <Confirm title={actions[asking].title} action={actions[asking].label + " " + props.app.name} danger={asking === "stop"} onConfirm={() => act(asking)} onCancel={() => setAsking(null)}>
          <p>{actions[asking].says}</p>
        </Confirm>
      )}
      <ErrorNote error={error} />
      <section aria-labelledby="status-h" class="block">
        <h2 id="status-h">Status</h2>
        {status?.problem && <ProblemNote problem={status.problem} />}
        {status?.problem?.deployment_id && (
          <p class="small">
            Read <Link href={"/apps/" + appID + "/deploys/" + status.problem.deployment_id}>the failed deploy’s log</Link>; the release before it may
            still serve.
          </p>
        )}
        {status === null ? (
          <p class="placeholder" aria-busy="true">
            Reading the status…
          </p>
        ) : workloads.length === 0 ? (
          <div class="empty-state small">
            <p>
              Nothing runs yet. Deploy the app from its <Link href={"/apps/" + appID + "/deploys"}>Deploys</Link> page.
            </p>
          </div>
        ) : (
          <table class="list" data-table="workloads">
            <caption class="visually-hidden">Workloads</caption>
            <thead>
              <tr>
                <th scope="col">Workload</th>
                <th scope="col">Running</th>
                <th scope="col">Health</th>
                <th scope="col">Restarts</th>
                <th scope="col">Last exit</th>
                <th scope="col">Listens at</th>
              </tr>
            </thead>
            <tbody>
              {workloads.map(([name, w]) => (
                <Fragment key={name}>
                  <tr data-workload={name}>
                    <th scope="row">
                      {name}
                      {w.primary && <span class="badge">primary</span>}
                    </th>
                    <td>{w.running ? <span class="pill pill-ok">running</span> : <span class="pill pill-plain">not running</span>}</td>
                    <td>
                      <StateBadge state={w.health || "unknown"} />
                    </td>
                    <td>{w.restarts}</td>
                    <td>{w.exit_code === null || w.exit_code === undefined ? "—" : "exit " + w.exit_code}</td>
                    <td>{w.address ? <code>{w.address}</code> : "—"}</td>
                  </tr>
                  {w.problem && (
                    <tr>
                      <td colSpan={6}>
                        <ProblemNote problem={w.problem} />
                      </td>
                    </tr>
                  )}
                </Fragment>
              ))}
            </tbody>
          </table>
        )}
        {status && (
          <p class="muted small">
            {status.deployment_id ? (
              <>
                Runs revision {status.revision} from deploy{" "}
                <Link href={"/apps/" + appID + "/deploys/" + status.deployment_id}>
                  <code>{status.deployment_id}</code>
                </Link>
                .
              </>
            ) : (
              "No deploy has run yet."
            )}
          </p>
        )}
      </section>
      <section aria-labelledby="usage-h" class="block">
        <h2 id="usage-h">Usage</h2>
        {usage === null ? (
          <p class="placeholder" aria-busy="true">
            Reading usage…
          </p>
        ) : !usage.supported ? (
          <p class="muted">This app’s runtime does not report resource usage.</p>
        ) : Object.keys(usage.workloads ?? {}).length === 0 ? (
          <p class="muted">Nothing runs, so nothing is used.</p>
        ) : (
          <table class="list" data-table="usage">
            <caption class="visually-hidden">Resource usage against limits</caption>
            <thead>
              <tr>
                <th scope="col">Workload</th>
                <th scope="col">CPU</th>
                <th scope="col">Memory</th>
                <th scope="col">Disk</th>
                <th scope="col">Volumes</th>
              </tr>
            </thead>
            <tbody>
              {Object.entries(usage.workloads ?? {})
                .sort(([a], [b]) => a.localeCompare(b))
                .map(([name, w]) => (
                  <tr key={name}>
                    <th scope="row">{name}</th>
                    <td>
                      <Meter label={"CPU of " + name} used={w.cpu_millis} limit={w.limits.cpu_millis} host={usage.host_cpu_millis} fmt={cores} />
                    </td>
                    <td>
                      <Meter label={"Memory of " + name} used={w.memory_bytes} limit={w.limits.memory_bytes} host={usage.host_memory_bytes} fmt={bytes} />
                    </td>
                    <td>
                      <Meter label={"Disk of " + name} used={w.disk_bytes} limit={w.limits.disk_bytes} fmt={bytes} />
                    </td>
                    <td>{volumes(w)}</td>
                  </tr>
                ))}
            </tbody>
          </table>
        )}
      </section>
      {desired === "stopped" && <StoppedBecause appID={appID} desired={desired} onStart={() => setAsking("start")} />}
    </div>
  );
}

/** Meter shows a reading against its limit (or the host, when there is none). */
function Meter(props: { label: string; used: number; limit: number; host?: number; fmt: (n: number) => string }) {
  const of = props.limit > 0 ? props.limit : props.host ?? 0;
  const pct = of > 0 ? Math.min(100, Math.round((props.used / of) * 100)) : 0;
  const text = props.fmt(props.used) + (props.limit > 0 ? " of " + props.fmt(props.limit) : of > 0 ? " (no limit; host " + props.fmt(of) + ")" : " (no limit)");
  return (
    <span class="meter">
      <span class="meter-text">{text}</span>
      {of > 0 && <progress max={100} value={pct} aria-label={props.label + ": " + pct + "%"} class={pct >= 90 ? "hot" : ""} />}
    </span>
  );
}

function volumes(w: WorkloadUsage): string {
  const v = Object.entries(w.volumes ?? {});
  return v.length === 0 ? "—" : v.map(([n, b]) => n + " " + bytes(b)).join(", ");
}


function cores(m: number): string {
  return (m / 1000).toFixed(m < 100 ? 3 : 2) + " cores";
}
