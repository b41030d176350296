import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { call, seg, stream, type Status } from "../api";
import { ErrorNote } from "../ui";

// The logs page, /apps/<app ID>/logs: a workload's last lines (GET
// …/logs?tail=N&workload=W) and, on request, following them as they are
// written (…&follow=true, server-sent events read with fetch; the process
// runtime only: elsewhere the API's refusal is shown).

const tails = [100, 500, 2000];

export function Logs(props: { appID: string }) {
  const base = "/apps/" + seg(props.appID) + "/logs";
  const [workloads, setWorkloads] = useState<string[]>([]);
  const [workload, setWorkload] = useState("");
  const [tail, setTail] = useState(100);
  const [lines, setLines] = useState<string[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [follow, setFollow] = useState(false);
  const [ended, setEnded] = useState("");
  const ref = useRef<HTMLPreElement>(null);

  useEffect(() => {
    call<Status>("GET", "/apps/" + seg(props.appID) + "/status")
      .then((s) => {
        const ws = Object.entries(s.workloads ?? {}).sort(([a, x], [b, y]) => Number(y.primary) - Number(x.primary) || a.localeCompare(b));
        setWorkloads(ws.map(([n]) => n));
      })
      .catch(() => setWorkloads([]));
  }, [props.appID]);

  const query = (extra = "") => base + "?tail=" + tail + (workload ? "&workload=" + seg(workload) : "") + extra;
  const read = useCallback(async () => {
    setError(null);
    try {
      const r = await call<{ workload: string; lines: string[] }>("GET", query());
      setLines(r.lines);
    } catch (e) {
      setError(e);
      setLines([]);
    }
  }, [base, tail, workload]);
  // Read when the page opens and when the workload or the length changes
  // (neither can while following); what a follow showed stays when it ends.
  useEffect(() => {
    read();
  }, [read]);

  useEffect(() => {
    if (!follow) return;
    setEnded("");
    setError(null);
    const ctl = new AbortController();
    let first = true;
    stream(query("&follow=true"), ctl.signal, (event, data) => {
      if (event === "log") {
        const v = JSON.parse(data) as { line: string };
        const reset = first; // the stream begins with the last tail lines
        first = false;
        setLines((ls) => (reset ? [v.line] : [...(ls ?? []), v.line]));
      } else if (event === "end") {
        setEnded((JSON.parse(data) as { reason: string }).reason);
      }
    })
      .catch(setError)
      .finally(() => {
        if (!ctl.signal.aborted) setFollow(false);
      });
    return () => ctl.abort();
  }, [follow, base, tail, workload]);

  useEffect(() => {
    const el = ref.current;
    if (el && el.scrollHeight - el.scrollTop - el.clientHeight < 80) el.scrollTop = el.scrollHeight;
  }, [lines?.length]);

  return (
    <div class="logs">
      <div class="actions">
        <label for="log-workload">Workload</label>
        <select id="log-workload" value={workload} disabled={follow} onChange={(e) => setWorkload((e.currentTarget as HTMLSelectElement).value)}>
          <option value="">primary</option>
          {workloads.map((w) => (
            <option key={w} value={w}>
              {w}
            </option>
          ))}
        </select>
        <label for="log-tail">Lines</label>
        <select id="log-tail" value={String(tail)} disabled={follow} onChange={(e) => setTail(Number((e.currentTarget as HTMLSelectElement).value))}>
          {tails.map((n) => (
            <option key={n} value={String(n)}>
              last {n}
            </option>
          ))}
        </select>
        <button type="button" disabled={follow} onClick={() => read()}>
          Refresh
        </button>
        <button type="button" class={follow ? "" : "primary"} aria-pressed={follow} onClick={() => setFollow(!follow)}>
          {follow ? "Stop following" : "Follow"}
        </button>
        <span class="muted" role="status" aria-live="polite">
          {follow ? "Following: new lines appear as they are written." : ended ? "The log ended: " + (ended === "stopped" ? "the workload stopped (a redeploy replaced it, or the app was stopped)." : ended === "lagged" ? "this page fell behind; follow again." : ended) : ""}
        </span>
      </div>
      <ErrorNote error={error} />
      <pre class="log tall" ref={ref} role="log" aria-label="The workload's output" tabIndex={0} data-lines={lines?.length ?? 0}>
        {lines === null ? (
          <span class="muted">Reading the log…</span>
        ) : lines.length === 0 ? (
          <span class="muted">No output yet. A running workload’s lines appear here; Follow shows them as they are written.</span>
        ) : (
          lines.map((l, i) => (
            <span key={i} class="ln">
              {l}
              {"\n"}
            </span>
          ))
        )}
      </pre>
    </div>
  );
}
