import { Fragment } from "preact";
import { useCallback, useEffect, useState } from "preact/hooks";
import { ApiError, call, seg } from "../api";
import { Link } from "../router";
import { ErrorNote, usePoll, when } from "../ui";
import type { AppPageProps } from "./app";
import "./security.css";

// An app's security, /apps/<app ID>/security: the last scan
// (GET …/security): its score out of 100 against the host minimum
// (GET /policy min_security_score, when the person may read policy), the
// basis (which scanner looked at what, which OSV database of which date),
// the counts and the findings by severity; Scan now (POST …/security/scan,
// 202, then read again until the scan is done or failed) for those holding
// app.deploy on the app (the verb the route requires), the reason otherwise.

export type Severity = "critical" | "high" | "medium" | "low";

export interface Finding {
  id: string;
  severity: Severity;
  title: string;
  path: string | null;
  fixable: boolean;
}

/** SecurityView is GET /apps/{id}/security's "security". */
export interface SecurityView {
  state: "never_scanned" | "scanning" | "done" | "failed";
  score: number | null;
  scanned_at: string | null;
  spec_id: string | null;
  basis: { scanner: string; what: string }[];
  findings: Finding[];
  counts: Record<Severity, number>;
  /** reason is why the last scan failed, when the API says. */
  reason?: string;
}

export const severities: Severity[] = ["critical", "high", "medium", "low"];

// What the Security tab reads, told to the header's ScoreBadge so that the
// two agree as soon as a scan ends.
const seen = new Set<(appID: string, v: SecurityView) => void>();
function tell(appID: string, v: SecurityView) {
  seen.forEach((l) => l(appID, v));
}

const scanVerb = "app.deploy";

/** securityPath is the API's path of an app's security result. */
export function securityPath(appID: string): string {
  return "/apps/" + seg(appID) + "/security";
}

/** Minimum is the host's min_security_score: a number, null when none is
 * set, or the refusal of GET /policy (the person may not read policy). */
type Minimum = number | null | ApiError;

/** useMinimum reads host policy's min_security_score once. */
export function useMinimum(): Minimum | undefined {
  const [min, setMin] = useState<Minimum | undefined>(undefined);
  const load = useCallback(async () => {
    try {
      const p = await call<{ policy: { min_security_score?: number | null } }>("GET", "/policy");
      const m = p.policy.min_security_score;
      setMin(typeof m === "number" && m > 0 ? m : null);
    } catch (e) {
      setMin(e instanceof ApiError ? e : new ApiError(0, "NETWORK", String(e)));
    }
  }, []);
  usePoll(load, 60000, [load]);
  return min;
}

export function Security(props: AppPageProps) {
  const { appID, verbs } = props;
  const [view, setView] = useState<SecurityView | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [asking, setAsking] = useState(false);
  const min = useMinimum();
  const load = useCallback(async () => {
    try {
      const r = await call<{ security: SecurityView }>("GET", securityPath(appID));
      setView(r.security);
      tell(appID, r.security);
      setError(null);
    } catch (e) {
      setError(e);
    }
  }, [appID]);
  const scanning = view?.state === "scanning";
  // Read again every second while a scan runs, then every half minute
  // (the daily scan and the one after each deploy happen behind the page).
  usePoll(load, scanning ? 1000 : 30000, [load, scanning]);

  const scan = async () => {
    setAsking(true);
    setError(null);
    try {
      const r = await call<{ security: SecurityView }>("POST", securityPath(appID) + "/scan");
      setView(r.security);
      tell(appID, r.security);
    } catch (e) {
      setError(e);
    } finally {
      setAsking(false);
    }
  };
  const mayScan = verbs?.includes(scanVerb) ?? false;

  return (
    <div class="security">
      <div class="actions sec-actions">
        {verbs === null ? (
          <span class="muted">&nbsp;</span>
        ) : mayScan ? (
          <>
            <button type="button" class="primary" disabled={asking || scanning || view === null} aria-busy={asking || scanning} onClick={scan} data-scan>
              {scanning ? "Scanning…" : "Scan now"}
            </button>
            <span class="hint">Scans the app’s source as uploaded or checked out and its pinned spec revision.</span>
          </>
        ) : (
          <p class="hint" data-no-scan>
            You may read this app’s security results but not start a scan: scanning needs the <code>{scanVerb}</code> verb on the app. Ask its owner.
          </p>
        )}
      </div>
      <ErrorNote error={error} />
      <Score view={view} min={min} appID={appID} />
      {/* What follows the score waits for the minimum too, which may
          lengthen the score's panel: nothing below it moves. */}
      {view && min !== undefined && view.state === "never_scanned" ? (
        <NeverScanned />
      ) : (
        view &&
        min !== undefined && (
          <>
            <Basis view={view} />
            <Findings view={view} />
          </>
        )
      )}
    </div>
  );
}

/** Score is the score out of 100, the scan's state and the host minimum;
 * a placeholder of the same size until read. */
function Score(props: { view: SecurityView | null; min: Minimum | undefined; appID: string }) {
  const { view, min } = props;
  const score = view?.score ?? null;
  const below = typeof min === "number" && (score === null || score < min);
  const state = view?.state;
  return (
    <section class={"block panel sec-score" + (below ? " below" : "")} aria-labelledby="score-h" aria-busy={view === null}>
      <h2 id="score-h">Security score</h2>
      <div class="sec-score-row">
        <p class="sec-number" data-score={score ?? ""}>
          {view === null ? (
            <span class="skeleton-text">00</span>
          ) : score === null ? (
            <span class="sec-none">—</span>
          ) : (
            <>
              <strong>{score}</strong>
              <span class="sec-outof"> / 100</span>
            </>
          )}
        </p>
        <div class="sec-facts">
          <p data-state={state ?? ""}>
            {view === null ? (
              <span class="muted">Reading the last scan…</span>
            ) : state === "never_scanned" ? (
              <span class="pill pill-plain">never scanned</span>
            ) : state === "scanning" ? (
              <>
                <span class="pill pill-busy">scanning</span> <span class="muted">A scan is under way; the page follows it.{score !== null && " The score shown is the last one."}</span>
              </>
            ) : state === "failed" ? (
              <span class="pill pill-bad">scan failed</span>
            ) : (
              <span class="pill pill-ok">scanned</span>
            )}
            {view?.scanned_at && <span class="muted"> Last finished {when(view.scanned_at)}.</span>}
          </p>
          <p class="muted small" data-spec-id={view?.spec_id ?? ""}>
            {view?.spec_id ? (
              <>
                Of the spec revision <code>{view.spec_id}</code> pinned then. Higher is better: each finding takes points off, the worst the most.
              </>
            ) : (
              "Higher is better: each finding takes points off, the worst the most."
            )}
          </p>
          <p class="sec-min" data-minimum={typeof min === "number" ? min : ""} data-below={below ? "true" : "false"}>
            <MinimumLine min={min} score={score} below={below} appID={props.appID} />
          </p>
        </div>
      </div>
      {state === "failed" && (
        <div class="error problem" role="alert" data-failed>
          <p class="msg">{view?.reason ? "The last scan failed: " + view.reason : "The last scan failed."}</p>
          <p class="remedy">
            {view?.reason ? "" : "The security.scan_failed event of the app says why. "}
            {score !== null ? "The score above is the last finished scan’s. " : ""}Fix what stopped it and scan again.
          </p>
        </div>
      )}
    </section>
  );
}

function MinimumLine(props: { min: Minimum | undefined; score: number | null; below: boolean; appID: string }) {
  const { min, score, below } = props;
  if (min === undefined) return <span class="muted">&nbsp;</span>;
  if (min instanceof ApiError) return <span class="muted">The host may set a minimum score, under which deploys are refused; only those who may view the installation see it.</span>;
  if (min === null) return <span class="muted">The host sets no minimum score: deploys are not held back by it.</span>;
  if (!below) {
    return (
      <span>
        The host minimum is <strong>{min}</strong>: this app is at or above it, so its deploys are allowed.
      </span>
    );
  }
  return (
    <span class="sec-below">
      The host minimum is <strong>{min}</strong>: this app is {score === null ? "not scanned yet" : "below it"}, so its plans and deploys are refused (<code>PLAN_SECURITY_BELOW_THRESHOLD</code>)
      {score === null ? " until a scan scores it at " + min + " or more." : "; a running app below it may be stopped after a grace period."} See <Link href={"/apps/" + props.appID + "/plan"}>the plan</Link>.
    </span>
  );
}

function NeverScanned() {
  return (
    <section class="block empty-state" aria-labelledby="never-h" data-empty>
      <h2 id="never-h">Not scanned yet</h2>
      <p>
        A scan reads the app’s source for committed secrets (private keys, cloud keys, tokens), matches its dependency manifests and lock files (Go, npm, Python) against known
        vulnerabilities, and checks its spec for risks such as no health check or no resource limits. It scores the app from 0 to 100.
      </p>
      <p>Apps are scanned after each deploy of a new revision and daily. Where the host sets a minimum score, a never-scanned app’s plans and deploys are refused until a scan scores it at or above the minimum.</p>
      <p>Scan it now with “Scan now” above; the app needs a pinned spec revision.</p>
    </section>
  );
}

function Basis(props: { view: SecurityView }) {
  const { view } = props;
  return (
    <section class="block sec-basis" aria-labelledby="basis-h">
      <h2 id="basis-h">What was checked</h2>
      {view.basis.length === 0 ? (
        <p class="muted">No finished scan says yet.</p>
      ) : (
        <dl class="facts" data-basis>
          {view.basis.map((b, i) => (
            <Fragment key={i}>
              <dt>{b.scanner}</dt>
              <dd>{b.what}</dd>
            </Fragment>
          ))}
        </dl>
      )}
      <ul class="sec-counts" aria-label="Findings by severity" data-counts>
        {severities.map((s) => (
          <li key={s} class={"sev-" + s + ((view.counts[s] ?? 0) > 0 ? " some" : "")} data-severity={s}>
            <span class="sec-count">{view.counts[s] ?? 0}</span> {s}
          </li>
        ))}
      </ul>
    </section>
  );
}

function Findings(props: { view: SecurityView }) {
  const { view } = props;
  if (view.findings.length === 0) {
    return (
      <section class="block" aria-labelledby="findings-h">
        <h2 id="findings-h">Findings</h2>
        <p class="muted">{view.state === "done" ? "Nothing found: the scan found no secret, vulnerable dependency or spec risk." : "No findings from a finished scan."}</p>
      </section>
    );
  }
  return (
    <section class="block" aria-labelledby="findings-h">
      <h2 id="findings-h">Findings</h2>
      {severities.map((s) => {
        const list = view.findings.filter((f) => f.severity === s);
        if (list.length === 0) return null;
        return (
          <div key={s} class="sec-group" data-group={s}>
            <h3>
              <span class={"sev-badge sev-" + s}>{s}</span> {list.length} {list.length === 1 ? "finding" : "findings"}
            </h3>
            <table class="list fixed" data-table={"findings-" + s}>
              <caption class="visually-hidden">{s} findings</caption>
              <thead>
                <tr>
                  <th scope="col" class="sec-title">
                    Finding
                  </th>
                  <th scope="col">Where</th>
                  <th scope="col" class="sec-fix">
                    Fixable
                  </th>
                </tr>
              </thead>
              <tbody>
                {list.map((f) => (
                  <tr key={f.id} data-finding={f.id}>
                    <td>{f.title}</td>
                    <td>{f.path ? <code>{f.path}</code> : <span class="muted">the app as a whole</span>}</td>
                    <td>{f.fixable ? "yes" : <span class="muted">no fix known</span>}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        );
      })}
    </section>
  );
}

/** ScoreBadge is the app's last score, linking to its Security tab: for
 * the app's header (nothing until read, and nothing on a refusal). */
export function ScoreBadge(props: { appID: string }) {
  const [view, setView] = useState<SecurityView | null>(null);
  const load = useCallback(async () => {
    try {
      setView((await call<{ security: SecurityView }>("GET", securityPath(props.appID))).security);
    } catch {
      setView(null);
    }
  }, [props.appID]);
  usePoll(load, 30000, [load]);
  useEffect(() => {
    const l = (id: string, v: SecurityView) => id === props.appID && setView(v);
    seen.add(l);
    return () => {
      seen.delete(l);
    };
  }, [props.appID]);
  if (!view) return null;
  return (
    <Link href={"/apps/" + props.appID + "/security"} class="sec-badge" data-score-badge={view.score ?? ""}>
      {view.score === null ? (view.state === "scanning" ? "Security: scanning…" : "Security: not scanned") : "Security " + view.score + "/100"}
    </Link>
  );
}
