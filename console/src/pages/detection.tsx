import { useEffect, useRef, useState } from "preact/hooks";
import { call, seg, type Deployment } from "../api";
import { Link, navigate } from "../router";
import { Confirm, ErrorNote, when } from "../ui";
import type { AppPageProps } from "./app";
import { type AppSource, type Bid, type DetectionRecord, type DiffResult, type EnvDoc, type Question, type SpecDoc, uploadArchive } from "./onboard";
import { ArchivePicker, UploadProgress, type Progress } from "./upload";
import "./detection.css";

// The detection page, /apps/<app ID>/detection: the detection record (GET
// …/detection), read again while detection runs (and, after an upload or
// a repository's creation, until it has run on that source); the winning
// proposal (workloads, builds, commands, ports, environment, slots,
// volumes), its evidence and the runners-up; the outstanding questions with
// a form to answer them (POST …/detection/answers, never a secret); accept
// with values and secrets (POST …/detection/accept; secrets are write-only,
// and over a configured app the diff of GET …/detection/diff is shown and
// confirmed first); rerun (POST …/detection/rerun); and once accepted,
// "Deploy now" (POST …/deployments) on to the deploy's page with its live
// log. An app without a source yet takes an archive here.

/** ValueRow is one value set at accept. */
interface ValueRow {
  key: string;
  value: string;
  secret: boolean;
  workload: string;
}

type AppWithSource = NonNullable<AppPageProps["app"]> & { source?: AppSource | null };

export function Detection(props: AppPageProps) {
  const { appID } = props;
  const app = props.app as AppWithSource | null;
  const path = "/apps/" + seg(appID) + "/detection";
  // What this page waits for: detection of the checkout an upload made, or
  // of a repository being cloned (from /new, or an upload here).
  const [want, setWant] = useState(() => {
    const q = new URLSearchParams(location.search);
    return { checkout: q.get("checkout") ?? "", repository: q.get("from") === "repository" };
  });
  const [rec, setRec] = useState<DetectionRecord | null>(null);
  const [error, setError] = useState<unknown>(null);
  const appRef = useRef(app);
  appRef.current = app;

  useEffect(() => {
    let live = true;
    let timer = 0;
    let n = 0;
    const step = async () => {
      try {
        const r = await call<DetectionRecord>("GET", path);
        if (!live) return;
        setRec(r);
        setError(null);
        // Often at first (detection takes moments, a clone seconds), then
        // every few seconds.
        if (detecting(r, want, appRef.current)) timer = window.setTimeout(step, n++ < 100 ? 600 : 3000);
      } catch (e) {
        if (!live) return;
        setError(e);
        timer = window.setTimeout(step, 3000);
      }
    };
    step();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [path, want]);

  const waiting = rec === null || detecting(rec, want, app);
  const noSource = rec !== null && rec.status === "pending" && !waiting;

  // After an upload here: read the app again (its source names the new
  // checkout), then wait for detection of that checkout.
  const uploaded = async (checkout: string) => {
    await props.onChanged();
    setWant({ checkout, repository: false });
  };

  const [busy, setBusy] = useState(false);
  const rerun = async () => {
    setBusy(true);
    setError(null);
    try {
      setRec(await call<DetectionRecord>("POST", path + "/rerun"));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  return (
    <div class="detection">
      <div class="actions">
        <button type="button" onClick={rerun} disabled={busy || waiting || noSource} aria-busy={busy}>
          Run detection again
        </button>
        <span class="muted small" aria-live="polite">
          {busy ? "Detecting…" : rec && rec.status !== "pending" ? "Last run " + when(rec.updated_at) + (rec.duration_ms ? " in " + Math.max(1, Math.round(rec.duration_ms)) + " ms" : "") : ""}
        </span>
      </div>
      <ErrorNote error={error} />
      {waiting ? (
        <section class="block detecting" aria-busy="true" aria-labelledby="detecting-h">
          <h2 id="detecting-h">Detecting</h2>
          <p class="placeholder" role="status">
            {want.repository && !(app?.source) ? "Cloning the repository, then detecting how to run the app…" : "Detecting how to run the app…"}
          </p>
        </section>
      ) : noSource ? (
        <NoSource appID={appID} onUploaded={uploaded} />
      ) : rec!.status === "failed" ? (
        <section class="block" aria-labelledby="failed-h">
          <h2 id="failed-h">Detection failed</h2>
          <div class="error problem">
            <p class="msg">{capital(rec!.error || "detection failed")}.</p>
            <p class="remedy">
              {rec!.error?.startsWith("fetching the source failed")
                ? "Check the repository, its ref and subdirectory, or upload an archive below."
                : "Fix the source and upload it again below, or write a spec by hand on the Spec page."}
            </p>
          </div>
          <NoSource appID={appID} onUploaded={uploaded} again />
        </section>
      ) : !rec!.winner ? (
        <section class="block" aria-labelledby="none-h">
          <h2 id="none-h">Nothing detected</h2>
          <div class="empty-state small">
            <p>
              No detector recognised the source (a Go module, a Node.js package, a Python app, a Procfile, a Dockerfile, a compose file or static files). Write
              a spec by hand on the <Link href={"/apps/" + appID + "/spec"}>Spec</Link> page, or upload another archive.
            </p>
          </div>
          <NoSource appID={appID} onUploaded={uploaded} again />
        </section>
      ) : (
        <Found
          key={rec!.updated_at}
          appID={appID}
          app={app}
          rec={rec!}
          onRecord={setRec}
          onAccepted={props.onChanged}
          onUploaded={uploaded}
        />
      )}
    </div>
  );
}

/**
 * detecting says whether detection is still to come: it runs; or the page
 * waits for detection of an upload's checkout (unless a later source
 * replaced it), or of a repository being cloned; or the app has a source
 * not detected yet. A pending record of an app without a source is not:
 * nothing comes by waiting.
 */
function detecting(r: DetectionRecord, want: { checkout: string; repository: boolean }, app: AppWithSource | null): boolean {
  if (r.status === "running") return true;
  const done = r.status === "done" || r.status === "failed";
  if (want.checkout) {
    const replaced = !!app?.source?.checkout_id && app.source.checkout_id !== want.checkout;
    return !replaced && !(done && r.checkout_id === want.checkout);
  }
  if (done) return false;
  return want.repository || app === null || !!app.source;
}

/** NoSource takes an archive as the app's source, here. */
function NoSource(props: { appID: string; onUploaded: (checkout: string) => void; again?: boolean }) {
  const [file, setFile] = useState<File | null>(null);
  const [progress, setProgress] = useState<Progress>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    if (!file || busy) return;
    setBusy(true);
    setError(null);
    try {
      setProgress({ sent: 0, total: file.size });
      const up = await uploadArchive(props.appID, file, (sent, total) => setProgress({ sent, total: total || file.size }));
      props.onUploaded(up.checkout_id);
    } catch (err) {
      setProgress(null);
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="block" aria-labelledby="source-h">
      <h2 id="source-h">{props.again ? "Upload another archive" : "This app has no source yet"}</h2>
      {!props.again && <p class="lead">Upload the app’s source as an archive; detection runs on it and proposes how to run the app.</p>}
      <form onSubmit={submit} class="narrow-form">
        <ArchivePicker file={file} onFile={setFile} disabled={busy} />
        <UploadProgress progress={progress} label="Upload of the archive" />
        <ErrorNote error={error} />
        <button type="submit" class="primary" disabled={busy || !file} aria-busy={busy}>
          Upload
        </button>
      </form>
    </section>
  );
}

/** Found is a detection with a winner: the proposal, questions and accept. */
function Found(props: {
  appID: string;
  app: AppWithSource | null;
  rec: DetectionRecord;
  onRecord: (r: DetectionRecord) => void;
  onAccepted: () => Promise<void>;
  onUploaded: (checkout: string) => void;
}) {
  const { appID, rec } = props;
  const w = rec.winner!;
  const asked = rec.questions.filter((q) => q.kind !== "secret");
  const secrets = secretNames(w.proposal, rec.questions);
  return (
    <>
      <section class="block" aria-labelledby="proposal-h" data-detector={w.detector}>
        <h2 id="proposal-h">
          Proposal: <span class="detector">{w.detector}</span> <span class="badge">score {w.score}</span>
        </h2>
        <dl class="facts">
          <dt>Source</dt>
          <dd>{sourceText(props.app?.source ?? null, rec)}</dd>
          <dt>Detected</dt>
          <dd>{when(rec.updated_at)}</dd>
        </dl>
        <Proposal doc={w.proposal} />
        {w.rejected && w.rejected.length > 0 && (
          <div class="error problem">
            <p class="msg">The compose file uses constructs svc cannot carry; accepting is refused until they are gone:</p>
            <ul>
              {w.rejected.map((r, i) => (
                <li key={i}>{[r.service, r.construct, r.reason].filter(Boolean).join(": ")}</li>
              ))}
            </ul>
          </div>
        )}
        <h3 id="evidence-h">Evidence</h3>
        <EvidenceList bid={w} labelledby="evidence-h" />
      </section>
      <Questions appID={appID} rec={rec} asked={asked} onRecord={props.onRecord} />
      <Accept appID={appID} app={props.app} doc={w.proposal} secrets={secrets} unanswered={asked.length} onAccepted={props.onAccepted} />
      <section class="block" aria-labelledby="runners-h">
        <h2 id="runners-h">Runners-up</h2>
        {rec.runners_up.length === 0 ? (
          <p class="muted">No other detector bid on this source.</p>
        ) : (
          <ul class="runners">
            {rec.runners_up.map((b) => (
              <li key={b.detector} data-detector={b.detector}>
                <details>
                  <summary>
                    <strong>{b.detector}</strong> <span class="badge">score {b.score}</span> <span class="muted small">{summary(b.proposal)}</span>
                  </summary>
                  <EvidenceList bid={b} />
                  <Proposal doc={b.proposal} compact />
                </details>
              </li>
            ))}
          </ul>
        )}
      </section>
      <details class="block new-source">
        <summary>Upload a new source</summary>
        <NoSource appID={appID} onUploaded={props.onUploaded} again />
      </details>
    </>
  );
}

function sourceText(src: AppSource | null, rec: DetectionRecord): string {
  const commit = rec.commit ? rec.commit.slice(0, 12) : "";
  if (src?.kind === "repository") return (src.repository ?? "") + (src.ref ? " @ " + src.ref : "") + (src.subdir ? " / " + src.subdir : "") + (commit ? " (" + commit + ")" : "");
  if (src?.kind === "archive") return "uploaded archive" + (commit ? " " + commit : "");
  return commit || "—";
}

function summary(d: SpecDoc): string {
  return Object.entries(d.workloads ?? {})
    .map(([n, w]) => n + ": " + (w.run.command?.join(" ") || (w.build?.kind === "static" ? "static files" : "the image's command")) + (w.run.port ? " on " + w.run.port : ""))
    .join("; ");
}

function EvidenceList(props: { bid: Bid; labelledby?: string }) {
  const ev = props.bid.evidence ?? [];
  if (ev.length === 0) return <p class="muted small">No evidence recorded.</p>;
  return (
    <ul class="evidence" aria-labelledby={props.labelledby}>
      {ev.map((e, i) => (
        <li key={i}>
          <code>{e.path || "."}</code> {e.reason}
        </li>
      ))}
    </ul>
  );
}

function envText(v: EnvDoc): string {
  if (typeof v === "string") return v === "" ? "(empty)" : v;
  if ("secret" in v) return "secret " + v.secret;
  return "slot " + v.slot + "." + v.field;
}

function EnvList(props: { env?: Record<string, EnvDoc> }) {
  const keys = Object.keys(props.env ?? {}).sort();
  if (keys.length === 0) return <span class="muted">—</span>;
  return (
    <ul class="env">
      {keys.map((k) => (
        <li key={k}>
          <code>{k}</code> = <span class={typeof props.env![k] === "string" ? "" : "ref"}>{envText(props.env![k])}</span>
        </li>
      ))}
    </ul>
  );
}

/** Proposal shows a spec document: its workloads, environment, slots, volumes. */
function Proposal(props: { doc: SpecDoc; compact?: boolean }) {
  const d = props.doc;
  const workloads = Object.entries(d.workloads ?? {}).sort(([a, x], [b, y]) => Number(!!y.primary) - Number(!!x.primary) || a.localeCompare(b));
  return (
    <div class="proposal">
      <table class="list" data-table={props.compact ? undefined : "proposal"}>
        <caption class="visually-hidden">Workloads of the proposal</caption>
        <thead>
          <tr>
            <th scope="col">Workload</th>
            <th scope="col">Build</th>
            <th scope="col">Run</th>
            <th scope="col">Port</th>
            <th scope="col">Environment</th>
          </tr>
        </thead>
        <tbody>
          {workloads.map(([name, w]) => (
            <tr key={name} data-workload={name}>
              <th scope="row">
                {name}
                {w.primary && <span class="badge">primary</span>}
              </th>
              <td>
                {w.build ? (
                  <>
                    <span class="pill pill-plain">{w.build.kind}</span> {w.build.command && <code>{w.build.command}</code>}
                    {w.build.dockerfile && <code>{w.build.dockerfile}</code>}
                    {w.build.image && <code>{w.build.image}</code>}
                  </>
                ) : (
                  <span class="muted">none</span>
                )}
              </td>
              <td>{w.run.command && w.run.command.length > 0 ? <code class="cmd">{w.run.command.join(" ")}</code> : <span class="muted">default</span>}</td>
              <td>{w.run.port ?? "—"}</td>
              <td>
                <EnvList env={w.env} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {!props.compact && (
        <dl class="facts doc-facts">
          <dt>Every workload’s environment</dt>
          <dd>
            <EnvList env={d.env} />
          </dd>
          <dt>Slots</dt>
          <dd>
            {Object.keys(d.slots ?? {}).length === 0 ? (
              <span class="muted">none</span>
            ) : (
              Object.entries(d.slots!).map(([n, s]) => (
                <span key={n} class="tag">
                  {n} ({s.type}
                  {s.required ? ", required" : ""})
                </span>
              ))
            )}
          </dd>
          <dt>Volumes</dt>
          <dd>
            {Object.keys(d.volumes ?? {}).length === 0 ? (
              <span class="muted">none</span>
            ) : (
              Object.entries(d.volumes!).map(([n, v]) => (
                <span key={n} class="tag">
                  {n} ({Math.round(v.size_bytes / (1 << 20))} MiB)
                </span>
              ))
            )}
          </dd>
        </dl>
      )}
    </div>
  );
}

/** secretNames are the secrets the proposal refers to or asks for. */
function secretNames(d: SpecDoc, qs: Question[]): string[] {
  const names = new Set<string>();
  const add = (env?: Record<string, EnvDoc>) => {
    for (const v of Object.values(env ?? {})) if (typeof v === "object" && "secret" in v) names.add(v.secret);
  };
  add(d.env);
  for (const w of Object.values(d.workloads ?? {})) add(w.env);
  for (const q of qs) if (q.kind === "secret") names.add(q.key.replace(/^secret\./, ""));
  return [...names].sort();
}

/**
 * secretTargets are where a secret's value goes at accept: the workloads
 * whose environment refers to it, so that the document keeps the
 * proposal's shape; every workload ("") when the document's own
 * environment refers to it, or nothing does.
 */
function secretTargets(d: SpecDoc, name: string): string[] {
  const refers = (env?: Record<string, EnvDoc>) => Object.values(env ?? {}).some((v) => typeof v === "object" && "secret" in v && v.secret === name);
  if (refers(d.env)) return [""];
  const ws = Object.entries(d.workloads ?? {})
    .filter(([, w]) => refers(w.env))
    .map(([n]) => n)
    .sort();
  return ws.length > 0 ? ws : [""];
}

/** Questions answers what detection could not find (never a secret). */
function Questions(props: { appID: string; rec: DetectionRecord; asked: Question[]; onRecord: (r: DetectionRecord) => void }) {
  const { asked, rec } = props;
  const [values, setValues] = useState<Record<string, string>>(() => Object.fromEntries(asked.map((q) => [q.key, rec.answers[q.key] ?? q.default ?? ""])));
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const answered = Object.keys(rec.answers).filter((k) => !k.startsWith("secret.")).sort();
  const submit = async (e: Event) => {
    e.preventDefault();
    if (busy) return;
    setBusy(true);
    setError(null);
    try {
      const answers: Record<string, string> = {};
      for (const q of asked) answers[q.key] = values[q.key] ?? "";
      props.onRecord(await call<DetectionRecord>("POST", "/apps/" + seg(props.appID) + "/detection/answers", { answers }));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="block" aria-labelledby="questions-h">
      <h2 id="questions-h">Questions</h2>
      {asked.length === 0 ? (
        <p class="muted" data-questions="0">
          Detection has nothing to ask{answered.length > 0 ? " (answered: " + answered.join(", ") + ")" : ""}.
        </p>
      ) : (
        <form class="panel questions" onSubmit={submit} data-questions={asked.length}>
          <p class="hint">
            Detection could not find these. Each is filled in with its default until you answer; secrets are never asked here, they are given at accept below.
          </p>
          {asked.map((q) => {
            const id = "q-" + q.key.replace(/[^A-Za-z0-9_-]/g, "-");
            const v = values[q.key] ?? "";
            const set = (x: string) => setValues((vs) => ({ ...vs, [q.key]: x }));
            return (
              <div class="field" key={q.key}>
                <label for={id}>{q.prompt}</label>
                {q.kind === "bool" ? (
                  <select id={id} name={q.key} value={v} onChange={(e) => set((e.currentTarget as HTMLSelectElement).value)} aria-describedby={id + "-key"}>
                    <option value="true">true</option>
                    <option value="false">false</option>
                  </select>
                ) : (
                  <input
                    id={id}
                    name={q.key}
                    type="text"
                    inputMode={q.kind === "int" ? "numeric" : undefined}
                    value={v}
                    autocomplete="off"
                    aria-describedby={id + "-key"}
                    onInput={(e) => set((e.currentTarget as HTMLInputElement).value)}
                  />
                )}
                <p class="hint" id={id + "-key"}>
                  <code>{q.key}</code> ({q.kind}){q.default ? ", default " + q.default : ""}
                </p>
              </div>
            );
          })}
          <ErrorNote error={error} />
          <button type="submit" class="primary" disabled={busy} aria-busy={busy}>
            Answer and detect again
          </button>
        </form>
      )}
    </section>
  );
}

/** Accept writes the proposal with values and secrets as the pinned revision. */
function Accept(props: { appID: string; app: AppWithSource | null; doc: SpecDoc; secrets: string[]; unanswered: number; onAccepted: () => Promise<void> }) {
  const { appID } = props;
  const workloads = Object.keys(props.doc.workloads ?? {}).sort();
  const [secretValues, setSecretValues] = useState<Record<string, string>>({});
  const [rows, setRows] = useState<ValueRow[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [diff, setDiff] = useState<DiffResult | null>(null);
  const [accepted, setAccepted] = useState<number | null>(null);
  const [deployError, setDeployError] = useState<unknown>(null);
  const configured = !!props.app?.pinned;

  const values = () => [
    ...props.secrets
      .filter((k) => secretValues[k])
      .flatMap((k) => secretTargets(props.doc, k).map((w) => ({ key: k, value: secretValues[k], secret: true, workload: w || undefined }))),
    ...rows.filter((r) => r.key.trim()).map((r) => ({ key: r.key.trim(), value: r.value, secret: r.secret || undefined, workload: r.workload || undefined })),
  ];
  const accept = async (confirm: boolean) => {
    setDiff(null);
    setBusy(true);
    setError(null);
    try {
      const r = await call<{ spec: { revision: number } }>("POST", "/apps/" + seg(appID) + "/detection/accept", confirm ? { values: values(), confirm: true } : { values: values() });
      setAccepted(r.spec.revision);
      // Secret values are not kept once written.
      setSecretValues({});
      setRows(rows.map((x) => (x.secret ? { ...x, value: "" } : x)));
      await props.onAccepted();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const submit = async (e: Event) => {
    e.preventDefault();
    if (busy) return;
    if (!configured) return accept(false);
    // Over a configured app: show what changes, then ask.
    setBusy(true);
    setError(null);
    try {
      setDiff(await call<DiffResult>("GET", "/apps/" + seg(appID) + "/detection/diff"));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const deploy = async () => {
    setBusy(true);
    setDeployError(null);
    try {
      const d = await call<{ deployment: Deployment }>("POST", "/apps/" + seg(appID) + "/deployments", {});
      navigate("/apps/" + appID + "/deploys/" + d.deployment.id);
    } catch (e) {
      setDeployError(e);
    } finally {
      setBusy(false);
    }
  };
  const setRow = (i: number, r: Partial<ValueRow>) => setRows((rs) => rs.map((x, j) => (j === i ? { ...x, ...r } : x)));

  if (accepted !== null) {
    return (
      <section class="block" aria-labelledby="accept-h">
        <h2 id="accept-h">Accepted</h2>
        <div class="panel accepted" role="status">
          <p>
            The proposal is revision <strong data-revision={accepted}>{accepted}</strong>, pinned: the next deploy ships it. See it on the{" "}
            <Link href={"/apps/" + appID + "/spec"}>Spec</Link> page.
          </p>
          <div class="actions">
            <button type="button" class="primary" onClick={deploy} disabled={busy} aria-busy={busy}>
              Deploy now
            </button>
            <Link href={"/apps/" + appID + "/plan"} class="button">
              See the plan first
            </Link>
          </div>
          <ErrorNote error={deployError} />
        </div>
      </section>
    );
  }
  return (
    <section class="block" aria-labelledby="accept-h">
      <h2 id="accept-h">Accept</h2>
      <form class="panel accept" onSubmit={submit} autocomplete="off">
        {configured && (
          <p class="notice" role="note">
            This app is configured already (revision {props.app!.pinned!.revision} is pinned): accepting replaces its configuration. You will see what changes
            before it does.
          </p>
        )}
        {props.unanswered > 0 && <p class="hint">{props.unanswered === 1 ? "One question is" : props.unanswered + " questions are"} not answered: accepting now takes the defaults.</p>}
        {props.secrets.length > 0 && (
          <fieldset class="secrets">
            <legend>Secrets</legend>
            <p class="hint">
              Kept by the secrets adapter, never in the spec and never shown again. Leave one empty to set it later on the <Link href={"/apps/" + appID + "/secrets"}>Secrets</Link> page.
            </p>
            {props.secrets.map((k) => (
              <div class="field" key={k}>
                <label for={"s-" + k}>{k}</label>
                <input
                  id={"s-" + k}
                  name={"secret." + k}
                  type="password"
                  autocomplete="new-password"
                  value={secretValues[k] ?? ""}
                  onInput={(e) => {
                    const v = (e.currentTarget as HTMLInputElement).value;
                    setSecretValues((sv) => ({ ...sv, [k]: v }));
                  }}
                />
              </div>
            ))}
          </fieldset>
        )}
        <fieldset class="values">
          <legend>Values</legend>
          <p class="hint">Environment variables to set in the proposal, for every workload or one. A secret value goes to the secrets adapter.</p>
          {rows.length === 0 && <p class="muted small">None: the proposal as it is.</p>}
          {rows.map((r, i) => (
            <div class="value-row" key={i} role="group" aria-label={"Value " + (i + 1)}>
              <div class="field">
                <label for={"v-key-" + i}>Name</label>
                <input id={"v-key-" + i} name={"value-key-" + i} value={r.key} placeholder="GREETING" onInput={(e) => setRow(i, { key: (e.currentTarget as HTMLInputElement).value })} />
              </div>
              <div class="field">
                <label for={"v-value-" + i}>Value</label>
                <input
                  id={"v-value-" + i}
                  name={"value-value-" + i}
                  type={r.secret ? "password" : "text"}
                  autocomplete={r.secret ? "new-password" : "off"}
                  value={r.value}
                  onInput={(e) => setRow(i, { value: (e.currentTarget as HTMLInputElement).value })}
                />
              </div>
              <div class="field">
                <label for={"v-wl-" + i}>Workload</label>
                <select id={"v-wl-" + i} name={"value-workload-" + i} value={r.workload} onChange={(e) => setRow(i, { workload: (e.currentTarget as HTMLSelectElement).value })}>
                  <option value="">every workload</option>
                  {workloads.map((w) => (
                    <option key={w} value={w}>
                      {w}
                    </option>
                  ))}
                </select>
              </div>
              <label class="check">
                <input type="checkbox" name={"value-secret-" + i} checked={r.secret} onChange={(e) => setRow(i, { secret: (e.currentTarget as HTMLInputElement).checked })} /> Secret
              </label>
              <button type="button" class="quiet small" onClick={() => setRows((rs) => rs.filter((_, j) => j !== i))} aria-label={"Remove value " + (i + 1)}>
                Remove
              </button>
            </div>
          ))}
          <button type="button" class="small" onClick={() => setRows((rs) => [...rs, { key: "", value: "", secret: false, workload: "" }])}>
            Add a value
          </button>
        </fieldset>
        <ErrorNote error={error} />
        <button type="submit" class="primary" disabled={busy} aria-busy={busy}>
          {configured ? "Review and accept" : "Accept the proposal"}
        </button>
      </form>
      {diff && (
        <Confirm title="Replace the configuration?" action="Accept and replace" danger onConfirm={() => accept(true)} onCancel={() => setDiff(null)}>
          <p>
            Accepting writes a new pinned revision in place of revision {props.app?.pinned?.revision}. What changes{diff.effect ? " (a deploy would " + effectText(diff.effect) + ")" : ""}, before
            the values you set:
          </p>
          <div class="diff-wrap">
            <DiffTable diff={diff} />
          </div>
        </Confirm>
      )}
    </section>
  );
}

function capital(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1).replace(/[.]$/, "");
}

function effectText(e: string): string {
  return e.replace(/_/g, " ");
}

function DiffTable(props: { diff: DiffResult }) {
  const ch = props.diff.changes ?? [];
  if (ch.length === 0) return <p class="muted">Nothing: the proposal is what is pinned.</p>;
  return (
    <table class="list diff" data-table="diff">
      <caption class="visually-hidden">Changes</caption>
      <thead>
        <tr>
          <th scope="col">Path</th>
          <th scope="col">From</th>
          <th scope="col">To</th>
          <th scope="col">Effect</th>
        </tr>
      </thead>
      <tbody>
        {ch.map((c, i) => (
          <tr key={i}>
            <th scope="row">
              <code>{c.path}</code>
            </th>
            <td>{show(c.from)}</td>
            <td>{show(c.to)}</td>
            <td>{effectText(c.effect)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function show(v: unknown): string {
  if (v === null || v === undefined) return "—";
  return typeof v === "string" ? v : JSON.stringify(v);
}

