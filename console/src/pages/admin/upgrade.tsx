import { useCallback, useRef, useState } from "preact/hooks";
import { ApiError, call } from "../../api";
import { Confirm, ErrorNote, usePoll, when } from "../../ui";
import type { AdminPageProps } from "../admin";
import "./upgrade.css";

// Upgrade, /admin/upgrade: the version svc runs and the last upgrade
// (GET /api/v1/upgrade, install.view); a new binary chosen with the file
// input, with its signature when the operator configured a signing key,
// sent after a confirmation as the raw body of POST /api/v1/upgrade
// (?signature=<base64>; install.adapters.manage; 202). The page then
// reads the upgrade again every second until it is done or failed: a
// server restarting does not answer for a moment, which the page says
// instead of an error. In a cluster the upload is a rollout (state
// rolling): each server's step in its order, with its version and when it
// started and finished.

export interface UpgradeNode {
  id: string;
  version: string;
  state: string;
  started_at?: string | null;
  finished_at?: string | null;
}

export interface Upgrade {
  id: string;
  state: "checking" | "restarting" | "rolling" | "done" | "failed";
  from: string;
  to: string;
  reason: string | null;
  started_at: string;
  finished_at: string | null;
  nodes: UpgradeNode[] | null;
}

interface UpgradeAnswer {
  version: string;
  upgrade: Upgrade | null;
}

const manageVerb = "install.adapters.manage";
const base64 = /^[A-Za-z0-9+/_-]+={0,2}$/;

function underway(u: Upgrade | null | undefined): boolean {
  return !!u && (u.state === "checking" || u.state === "restarting" || u.state === "rolling");
}

export function UpgradePage(props: AdminPageProps) {
  const [answer, setAnswer] = useState<UpgradeAnswer | null>(null);
  const [error, setError] = useState<unknown>(null);
  // unreachable: the server did not answer while an upgrade was under way.
  const [unreachable, setUnreachable] = useState(false);
  const following = underway(answer?.upgrade);
  const load = useCallback(async () => {
    try {
      setAnswer(await call<UpgradeAnswer>("GET", "/upgrade"));
      setError(null);
      setUnreachable(false);
    } catch (e) {
      if (following && e instanceof ApiError && (e.status === 0 || e.status >= 502)) setUnreachable(true);
      else setError(e);
    }
  }, [following]);
  usePoll(load, following ? 1000 : 15000, [load, following]);
  const may = props.me.verbs.includes(manageVerb);

  return (
    <div class="host upgrade">
      <h1>Upgrade</h1>
      <p class="lead">Replace the svc binary in place: the new one is checked (it runs and reports its version; its signature verifies when a signing key is configured), swapped in and restarted. A binary that fails to start or become ready is swapped back.</p>
      <ErrorNote error={error} />
      <section class="block panel" aria-labelledby="up-version-h">
        <h2 id="up-version-h">Running version</h2>
        <p class="up-version" data-version={answer?.version ?? ""}>
          {answer ? <code>{answer.version}</code> : error ? <span class="muted">Not known: the server did not say (above).</span> : <span class="skeleton-text">Reading…</span>}
        </p>
      </section>
      {answer && <Progress upgrade={answer.upgrade} unreachable={unreachable} />}
      {answer &&
        (may ? (
          <UploadForm
            busy={following}
            onStarted={(u) => {
              setAnswer((a) => (a ? { ...a, upgrade: u } : a));
            }}
          />
        ) : (
          <p class="hint" data-no-upgrade>
            Upgrading needs the <code>{manageVerb}</code> verb on the installation; you may see the version and the last upgrade only.
          </p>
        ))}
    </div>
  );
}

const stateSays: Record<Upgrade["state"], string> = {
  checking: "Checking the new binary",
  restarting: "Restarting on the new binary",
  rolling: "Upgrading the cluster's servers one at a time",
  done: "Upgraded",
  failed: "Failed, the old binary kept",
};

const steps: Upgrade["state"][] = ["checking", "restarting", "done"];

function Progress(props: { upgrade: Upgrade | null; unreachable: boolean }) {
  const u = props.upgrade;
  if (!u) {
    return (
      <section class="block" aria-labelledby="up-last-h">
        <h2 id="up-last-h">Last upgrade</h2>
        <p class="muted" data-upgrade-state="">
          None yet: this installation has not been upgraded from here.
        </p>
      </section>
    );
  }
  const rollout = !!u.nodes && u.nodes.some((n) => n.state === "pending" || n.state === "upgrading" || !!n.started_at);
  const at = steps.indexOf(u.state === "rolling" ? "restarting" : u.state);
  return (
    <section class="block panel" aria-labelledby="up-last-h" aria-busy={underway(u)} data-upgrade-state={u.state}>
      <h2 id="up-last-h">{underway(u) ? "Upgrade under way" : "Last upgrade"}</h2>
      <p role="status" aria-live="polite">
        <span class={"pill " + (u.state === "done" ? "pill-ok" : u.state === "failed" ? "pill-bad" : "pill-busy")}>{u.state}</span> {stateSays[u.state]}
        {u.from && u.to && (
          <>
            : <code>{u.from}</code> → <code>{u.to}</code>
          </>
        )}
        .
        {props.unreachable && <span class="muted"> The server is restarting and does not answer yet; apps are unreachable for some seconds.</span>}
      </p>
      {u.state !== "failed" && (
        <ol class="up-steps" aria-label="Steps">
          {steps.map((s, i) => (
            <li key={s} class={i < at || u.state === "done" ? "done" : i === at ? "now" : ""} aria-current={i === at && u.state !== "done" ? "step" : undefined}>
              {s === "checking" ? "Check" : s === "restarting" ? "Swap and restart" : "Ready"}
            </li>
          ))}
        </ol>
      )}
      {u.state === "failed" && (
        <div class="error problem" data-upgrade-reason>
          <p class="msg">{u.reason || "The upgrade failed."}</p>
          <p class="remedy">
            {rollout
              ? "The rollout stopped at that server: the servers marked done run the new version, the others the one they ran before. Fix the new binary and upload it again."
              : <>svc runs {u.from ? <code>{u.from}</code> : "the binary it ran before"} still. Fix the new binary and upload it again.</>}
          </p>
        </div>
      )}
      <dl class="facts">
        <dt>Started</dt>
        <dd>{when(u.started_at)}</dd>
        <dt>Finished</dt>
        <dd>{u.finished_at ? when(u.finished_at) : "not yet"}</dd>
      </dl>
      {u.nodes && u.nodes.length > 1 && (
        <table class="list" data-table="upgrade-nodes">
          <caption>Nodes, upgraded one at a time</caption>
          <thead>
            <tr>
              <th scope="col">Node</th>
              <th scope="col">Version</th>
              <th scope="col">State</th>
              {rollout && <th scope="col">Finished</th>}
            </tr>
          </thead>
          <tbody>
            {u.nodes.map((n) => (
              <tr key={n.id} data-node={n.id}>
                <th scope="row">
                  <code>{n.id}</code>
                </th>
                <td>
                  <code>{n.version}</code>
                </td>
                <td>
                  <span class={"pill " + (n.state === "done" ? "pill-ok" : n.state === "failed" ? "pill-bad" : n.state === "upgrading" ? "pill-busy" : "")}>{n.state}</span>
                </td>
                {rollout && <td>{n.finished_at ? when(n.finished_at) : "-"}</td>}
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function UploadForm(props: { busy: boolean; onStarted: (u: Upgrade) => void }) {
  const [file, setFile] = useState<File | null>(null);
  const [signature, setSignature] = useState("");
  const [asking, setAsking] = useState(false);
  const [sending, setSending] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const input = useRef<HTMLInputElement>(null);
  const sig = signature.trim();
  const sigBad = sig !== "" && !base64.test(sig);

  const send = async () => {
    setAsking(false);
    if (!file) return;
    setSending(true);
    setError(null);
    try {
      const q = sig ? "?signature=" + encodeURIComponent(sig) : "";
      const r = await call<{ upgrade: Upgrade }>("POST", "/upgrade" + q, file, "application/octet-stream");
      props.onStarted(r.upgrade);
      setFile(null);
      setSignature("");
      if (input.current) input.current.value = "";
    } catch (e) {
      setError(e);
    } finally {
      setSending(false);
    }
  };

  return (
    <section class="block panel" aria-labelledby="up-new-h">
      <h2 id="up-new-h">Upgrade to a new binary</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (file && !sigBad) setAsking(true);
        }}
        aria-describedby="up-error"
      >
        <div class="field">
          <label for="up-file">The new svc binary</label>
          <input ref={input} id="up-file" name="upgrade_file" type="file" required disabled={props.busy || sending} aria-describedby="up-file-hint" onChange={(e) => setFile((e.currentTarget as HTMLInputElement).files?.[0] ?? null)} />
          <p class="hint" id="up-file-hint">
            The executable for this machine’s system and architecture, as built or released.
          </p>
        </div>
        <div class="field">
          <label for="up-signature">Signature (optional)</label>
          <input
            id="up-signature"
            name="upgrade_signature"
            autocomplete="off"
            spellcheck={false}
            value={signature}
            aria-invalid={sigBad}
            aria-describedby="up-signature-hint"
            onInput={(e) => setSignature((e.currentTarget as HTMLInputElement).value)}
          />
          <p class="hint" id="up-signature-hint">
            {sigBad ? "That is not base64." : "The binary’s signature in base64; required when the operator configured a signing key."}
          </p>
        </div>
        <ErrorNote error={error} id="up-error" />
        <div class="inline-form">
          <button type="submit" class="primary" disabled={!file || sigBad || props.busy || sending} aria-busy={sending}>
            Upgrade…
          </button>
          <span class="muted" role="status" aria-live="polite">
            {sending ? "Uploading " + (file?.name ?? "") + "…" : props.busy ? "An upgrade is under way." : ""}
          </span>
        </div>
      </form>
      {asking && file && (
        <Confirm title="Upgrade svc?" action={"Upgrade with " + file.name} danger onConfirm={send} onCancel={() => setAsking(false)}>
          <p>
            svc checks {file.name} ({file.size.toLocaleString()} bytes), swaps it in and restarts: apps are unreachable for some seconds, and the console for a little longer. In a cluster, nodes upgrade one at a
            time. A binary that does not start or become ready is swapped back.
          </p>
        </Confirm>
      )}
    </section>
  );
}
