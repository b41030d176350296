import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { API, ApiError, call, seg, type Status } from "../api";
import { Link } from "../router";
import { ErrorNote, usePoll } from "../ui";
import type { AppPageProps } from "./app";
import type { Screen } from "./terminal-screen";
import "./terminal.css";

// The terminal, /apps/<app ID>/terminal: a shell in one of the app's
// running workloads over the exec websocket (GET …/exec), where permitted.
//
// Framing (the server's execFraming): binary messages carry the
// terminal's bytes both ways; the page sends {"type":"resize",rows,cols}
// as a text message when the window (so the screen) changes size; the
// server ends with the text message {"type":"exit","code":N} and a normal
// close, which the page shows as the exit code. Closing the websocket
// (Disconnect, leaving the page) ends the shell.
//
// A browser cannot read why a websocket's handshake was refused, so the
// page asks first with a plain GET of the same address: the API answers it
// with its refusal (POLICY_EXEC_DISABLED when host policy turns exec off,
// PERM_VERB_REQUIRED without app.exec), or, to one who may open a
// terminal, 426 (an upgrade is needed): nothing is opened or audited.
// The screen (xterm.js) is a chunk of its own, loaded by this page only.

type Phase = "idle" | "connecting" | "open" | "ended";

/** permission asks whether the person may open a terminal in the app: null if so, else the API's refusal. */
export async function permission(appID: string): Promise<unknown> {
  try {
    await call("GET", "/apps/" + seg(appID) + "/exec");
    return null;
  } catch (e) {
    return e instanceof ApiError && e.status === 426 ? null : e;
  }
}

/** execURL is the websocket's address for a terminal of rows by cols in workload. */
export function execURL(loc: { protocol: string; host: string }, appID: string, workload: string, rows: number, cols: number): string {
  const q = new URLSearchParams();
  if (workload) q.set("workload", workload);
  q.set("rows", String(Math.min(1000, Math.max(1, rows))));
  q.set("cols", String(Math.min(1000, Math.max(1, cols))));
  return (loc.protocol === "https:" ? "wss:" : "ws:") + "//" + loc.host + API + "/apps/" + seg(appID) + "/exec?" + q.toString();
}

/** exitOf reads the server's exit message; null for any other text. */
export function exitOf(text: string): number | null {
  try {
    const m = JSON.parse(text) as { type?: unknown; code?: unknown };
    return m.type === "exit" && typeof m.code === "number" ? m.code : null;
  } catch {
    return null;
  }
}

export function Terminal({ appID }: AppPageProps) {
  // undefined: not asked yet; null: permitted; else the refusal.
  const [refused, setRefused] = useState<unknown>(undefined);
  const [status, setStatus] = useState<Status | null>(null);
  const [workload, setWorkload] = useState("");
  const [phase, setPhase] = useState<Phase>("idle");
  const [exit, setExit] = useState<number | null>(null);
  const [note, setNote] = useState("");
  const [error, setError] = useState<unknown>(null);
  const hostRef = useRef<HTMLDivElement>(null);
  const screenRef = useRef<Screen | null>(null);
  const wsRef = useRef<WebSocket | null>(null);

  useEffect(() => {
    let live = true;
    permission(appID).then((r) => live && setRefused(r));
    return () => {
      live = false;
    };
  }, [appID]);

  const loadStatus = useCallback(async () => {
    try {
      setStatus(await call<Status>("GET", "/apps/" + seg(appID) + "/status"));
    } catch (e) {
      setError(e);
    }
  }, [appID]);
  usePoll(loadStatus, 5000, [loadStatus]);

  const workloads = Object.entries(status?.workloads ?? {}).sort(([a, x], [b, y]) => Number(y.primary) - Number(x.primary) || a.localeCompare(b));
  const running = workloads.filter(([, w]) => w.running);
  // The primary workload, or the first running one, until one is chosen.
  useEffect(() => {
    if (running.length > 0 && !running.some(([n]) => n === workload)) setWorkload(running[0][0]);
  }, [running.map(([n]) => n).join()]);

  // The screen, once the person may use it: xterm's chunk loads then.
  useEffect(() => {
    if (refused !== null || !hostRef.current) return;
    let live = true;
    let screen: Screen | null = null;
    import("./terminal-screen")
      .then((m) => m.openScreen(hostRef.current!, "Terminal input", () => wsRef.current?.readyState === WebSocket.OPEN))
      .then((s) => {
        if (!live) return s.dispose();
        screen = s;
        screenRef.current = s;
        s.onData((b) => {
          const ws = wsRef.current;
          if (ws?.readyState === WebSocket.OPEN) ws.send(b);
        });
        s.onResize((rows, cols) => {
          const ws = wsRef.current;
          if (ws?.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "resize", rows, cols }));
        });
        s.write("Choose a workload and press Connect to open a shell in it.\r\n");
      })
      .catch(() => live && setError(new ApiError(0, "NETWORK", "The terminal could not be loaded.", "Reload the page.")));
    return () => {
      live = false;
      wsRef.current?.close(1000);
      wsRef.current = null;
      screen?.dispose();
      screenRef.current = null;
    };
  }, [refused]);

  const connect = async () => {
    const screen = screenRef.current;
    if (!screen || wsRef.current) return;
    setError(null);
    setExit(null);
    setNote("");
    setPhase("connecting");
    // Policy may have changed since the page asked.
    const r = await permission(appID);
    if (r) {
      setRefused(r);
      setPhase("idle");
      return;
    }
    screen.reset();
    const ws = new WebSocket(execURL(location, appID, workload, screen.rows, screen.cols));
    ws.binaryType = "arraybuffer";
    wsRef.current = ws;
    let opened = false;
    let code: number | null = null;
    ws.onopen = () => {
      opened = true;
      setPhase("open");
      screen.focus();
    };
    ws.onmessage = (ev) => {
      if (typeof ev.data === "string") {
        const c = exitOf(ev.data);
        if (c !== null) code = c;
      } else {
        screen.write(new Uint8Array(ev.data as ArrayBuffer));
      }
    };
    ws.onclose = async () => {
      const mine = wsRef.current === ws;
      if (mine) wsRef.current = null;
      setPhase("ended");
      if (code !== null) {
        setExit(code);
        screen.write("\r\n[the shell ended with exit code " + code + "]\r\n");
      } else if (!mine) {
        setNote("Disconnected: the shell was ended.");
      } else if (!opened) {
        setError((await permission(appID)) ?? new Error("The terminal could not be opened: check on the Overview that the workload is running, then connect again."));
      } else {
        setError(new Error("The connection ended before the shell did. Connect again to open a new shell."));
      }
    };
  };

  const disconnect = () => {
    const ws = wsRef.current;
    wsRef.current = null;
    ws?.close(1000);
  };

  if (refused !== null && refused !== undefined) {
    return (
      <div class="terminal-page">
        <p class="lead">You cannot open a terminal in this app.</p>
        <ErrorNote error={refused} />
      </div>
    );
  }
  const connected = phase === "open" || phase === "connecting";
  return (
    <div class="terminal-page">
      <div class="actions terminal-bar">
        <label for="workload">Workload</label>
        <select id="workload" name="workload" value={workload} disabled={connected || running.length === 0} onChange={(e) => setWorkload((e.currentTarget as HTMLSelectElement).value)}>
          {status === null && <option value="">Reading…</option>}
          {status !== null && running.length === 0 && <option value="">None running</option>}
          {workloads.map(([name, w]) => (
            <option key={name} value={name} disabled={!w.running}>
              {name}
              {w.primary ? " (primary)" : ""}
              {w.running ? "" : " (not running)"}
            </option>
          ))}
        </select>
        {connected ? (
          <button type="button" onClick={disconnect}>
            Disconnect
          </button>
        ) : (
          <button type="button" class="primary" onClick={connect} disabled={refused === undefined || running.length === 0 || !workload}>
            Connect
          </button>
        )}
        <span class="muted term-state" role="status" aria-live="polite">
          {phase === "connecting"
            ? "Connecting…"
            : phase === "open"
              ? "Connected to " + workload + ": the session is audited (app.exec)"
              : exit !== null
                ? "The shell ended with exit code " + exit + "."
                : note}
        </span>
      </div>
      <ErrorNote error={error} />
      {status !== null && running.length === 0 && (
        <p class="muted">
          Nothing of this app runs, so there is no shell to open: deploy or start it from its <Link href={"/apps/" + appID + "/deploys"}>Deploys</Link> page.
        </p>
      )}
      <div class="term-host" ref={hostRef} data-phase={phase} />
      <p class="hint">
        Tab goes to the shell while connected; Shift+Tab leaves the terminal.
        {exit !== null && (
          <>
            {" "}
            <strong class="term-exit" data-exit={exit}>
              Exit code {exit}
            </strong>
          </>
        )}
      </p>
    </div>
  );
}
