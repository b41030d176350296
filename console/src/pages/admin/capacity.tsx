import { useCallback, useState } from "preact/hooks";
import { all, ApiError, call, seg, type App, type Usage } from "../../api";
import { Link } from "../../router";
import { ErrorNote, usePoll } from "../../ui";
import type { AdminPageProps } from "../admin";
import { StateBadge } from "../apps";
import { bytes } from "../../ui";
import { cores, pct, type Capacity as CapacityAnswer } from "./host";
import "./host.css";

// Capacity, /admin/capacity: what the host has and what apps meant to run
// commit of it (GET /api/v1/capacity: CPU, memory, the host port range),
// as meters; then a table of every app with what its workloads hold (their
// limits) and use now (GET /api/v1/apps/{appID}/usage, a reading, not
// history). Read again every 10 seconds.

interface AppRow {
  app: App;
  usage: Usage | null;
  error: unknown;
}

export function Capacity(_props: AdminPageProps) {
  const [cap, setCap] = useState<CapacityAnswer | null>(null);
  const [rows, setRows] = useState<AppRow[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const load = useCallback(async () => {
    try {
      setCap(await call<CapacityAnswer>("GET", "/capacity"));
      const list = (await all<App>("/apps")).sort((a, b) => a.name.localeCompare(b.name));
      const out: AppRow[] = [];
      // A few at a time: one request per app.
      for (let i = 0; i < list.length; i += 6) {
        out.push(
          ...(await Promise.all(
            list.slice(i, i + 6).map(async (app) => {
              try {
                return { app, usage: await call<Usage>("GET", "/apps/" + seg(app.id) + "/usage"), error: null };
              } catch (e) {
                return { app, usage: null, error: e };
              }
            }),
          )),
        );
      }
      setRows(out);
      setError(null);
    } catch (e) {
      setError(e);
    }
  }, []);
  usePoll(load, 10000, [load]);

  return (
    <div class="host capacity">
      <h1>Capacity</h1>
      <p class="lead">What the host has, and what the apps meant to run commit of it by their declared limits. A workload without limits commits nothing and can use what is free.</p>
      <ErrorNote error={error} />
      <section class="block" aria-labelledby="cap-host-h">
        <h2 id="cap-host-h">Host</h2>
        <div class="meters" data-capacity={cap ? "loaded" : "loading"}>
          <HostMeter id="cpu" label="CPU" used={cap?.committed.cpu_millis} of={cap?.host.cpu_millis} free={cap?.free.cpu_millis} fmt={cores} />
          <HostMeter id="memory" label="Memory" used={cap?.committed.memory_bytes} of={cap?.host.memory_bytes} free={cap?.free.memory_bytes} fmt={bytes} />
          <HostMeter
            id="ports"
            label="Host ports"
            used={cap?.ports.used}
            of={cap ? (cap.ports.start > 0 ? cap.ports.end - cap.ports.start + 1 : 0) : undefined}
            free={cap?.ports.free}
            fmt={(n) => n + (n === 1 ? " port" : " ports")}
            none="Apps are not routed by port: none is held."
            note={cap && cap.ports.start > 0 ? "range " + cap.ports.start + "–" + cap.ports.end : undefined}
          />
        </div>
        <p class="muted small cap-summary">
          {cap
            ? cap.committed.apps + (cap.committed.apps === 1 ? " app" : " apps") + " meant to run" + (cap.committed.unlimited_workloads > 0 ? "; " + cap.committed.unlimited_workloads + (cap.committed.unlimited_workloads === 1 ? " workload declares" : " workloads declare") + " no limit" : "") + "."
            : "Reading…"}
        </p>
      </section>
      <section class="block" aria-labelledby="cap-apps-h">
        <h2 id="cap-apps-h">Apps</h2>
        {rows === null ? (
          <table class="list" aria-busy="true">
            <caption class="visually-hidden">Reading apps…</caption>
            <AppHead />
            <tbody>
              {Array.from({ length: 3 }, (_, i) => (
                <tr key={i} class="skeleton-row" aria-hidden="true">
                  <td colSpan={6} />
                </tr>
              ))}
            </tbody>
          </table>
        ) : rows.length === 0 ? (
          <div class="empty-state small">
            <p>No apps to show. The apps you administer are listed here with what they hold; apps are made with svc launch or on the Apps page.</p>
          </div>
        ) : (
          <table class="list" data-table="capacity-apps">
            <caption class="visually-hidden">What each app holds and uses</caption>
            <AppHead />
            <tbody>
              {rows.map((r) => (
                <AppLine key={r.app.id} row={r} />
              ))}
            </tbody>
          </table>
        )}
      </section>
    </div>
  );
}

function AppHead() {
  return (
    <thead>
      <tr>
        <th scope="col">App</th>
        <th scope="col">State</th>
        <th scope="col">Workloads</th>
        <th scope="col">CPU held</th>
        <th scope="col">Memory held</th>
        <th scope="col">Using now</th>
      </tr>
    </thead>
  );
}

function HostMeter(props: { id: string; label: string; used?: number; of?: number; free?: number; fmt: (n: number) => string; none?: string; note?: string }) {
  const known = props.used !== undefined && props.of !== undefined;
  const p = known ? pct(props.used!, props.of!) : 0;
  return (
    <div class="host-meter panel" data-meter={props.id} data-used={props.used} data-of={props.of}>
      <h3>{props.label}</h3>
      <p class="figure">
        {!known ? "…" : props.of! > 0 ? props.fmt(props.used!) + " of " + props.fmt(props.of!) : props.id === "ports" ? props.none : props.fmt(props.used!) + " committed; the host's total is not known"}
      </p>
      <progress max={100} value={p} aria-label={props.label + " committed: " + p + "%"} class={p >= 90 ? "hot" : ""} hidden={!known || props.of === 0} />
      <p class="muted small">{known && props.of! > 0 ? p + "% committed · " + props.fmt(props.free ?? 0) + " free" + (props.note ? " · " + props.note : "") : " "}</p>
    </div>
  );
}

function AppLine(props: { row: AppRow }) {
  const { app, usage, error } = props.row;
  const ws = Object.values(usage?.workloads ?? {});
  const sum = (f: (w: (typeof ws)[number]) => number) => ws.reduce((n, w) => n + f(w), 0);
  const unlimited = ws.filter((w) => w.limits.cpu_millis === 0 && w.limits.memory_bytes === 0).length;
  const heldCPU = sum((w) => w.limits.cpu_millis);
  const heldMem = sum((w) => w.limits.memory_bytes);
  return (
    <tr data-app={app.id}>
      <th scope="row">
        <Link href={"/apps/" + app.id}>{app.name}</Link>
      </th>
      <td>
        <StateBadge state={app.state} />
      </td>
      <td>{usage ? ws.length + (unlimited > 0 ? " (" + unlimited + " without limits)" : "") : "—"}</td>
      <td data-held="cpu">{usage && ws.length > 0 ? (heldCPU > 0 ? cores(heldCPU) : "no limit") : "—"}</td>
      <td data-held="memory">{usage && ws.length > 0 ? (heldMem > 0 ? bytes(heldMem) : "no limit") : "—"}</td>
      <td>
        {error instanceof ApiError && error.code === "STATE_INVALID" ? (
          <span class="muted small">nothing runs</span>
        ) : error ? (
          <span class="muted small">{(error as Error).message}</span>
        ) : !usage ? (
          "—"
        ) : !usage.supported ? (
          <span class="muted small">not reported by its runtime</span>
        ) : ws.length === 0 ? (
          <span class="muted small">nothing runs</span>
        ) : (
          cores(sum((w) => w.cpu_millis)) + " · " + bytes(sum((w) => w.memory_bytes))
        )}
      </td>
    </tr>
  );
}
