import { useEffect, useState } from "preact/hooks";
import { call, seg, type Deployment } from "../api";
import { Link, navigate } from "../router";
import { ErrorNote, ProblemNote } from "../ui";
import type { AppPageProps } from "./app";
import { useRevisions } from "./specdoc";
import "./specs.css";

// The plan, /apps/<app ID>/plan[?revision=<n>]: what a deploy of a revision
// (default the pinned one) would do and every reason it would be refused,
// with the warnings that never block (POST …/plan, which creates nothing);
// Deploy when nothing refuses (POST …/deployments).

interface PlanResult {
  deployable: boolean;
  runtime?: string;
  actions: { workload: string; step: string; detail: string }[];
  refusals: { code: string; message: string; remedy?: string; details?: Record<string, unknown> }[];
  warnings: { code: string; message: string }[];
}

export function Plan(props: AppPageProps) {
  const { appID } = props;
  const r = useRevisions(appID, 100);
  const asked = new URLSearchParams(location.search).get("revision") ?? "";
  const [rev, setRev] = useState(/^[1-9][0-9]*$/.test(asked) ? asked : "");
  const [plan, setPlan] = useState<{ rev: string; result: PlanResult } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [deploying, setDeploying] = useState(false);

  const run = async (which: string) => {
    setBusy(true);
    setError(null);
    try {
      const result = await call<PlanResult>("POST", "/apps/" + seg(appID) + "/plan", which ? { revision: Number(which) } : {});
      setPlan({ rev: which, result });
    } catch (e) {
      setPlan(null);
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  // Plan what the address names (or the pinned revision) at once.
  useEffect(() => {
    run(rev);
  }, [appID]);

  const deploy = async () => {
    setDeploying(true);
    setError(null);
    try {
      const d = await call<{ deployment: Deployment }>("POST", "/apps/" + seg(appID) + "/deployments", plan?.rev ? { revision: Number(plan.rev) } : {});
      props.onChanged();
      navigate("/apps/" + appID + "/deploys/" + d.deployment.id);
    } catch (e) {
      setError(e);
    } finally {
      setDeploying(false);
    }
  };

  const planned = plan ? (plan.rev ? Number(plan.rev) : r.pinned) : null;
  const res = plan?.result;
  return (
    <div class="plan">
      <form
        class="inline-form plan-form"
        onSubmit={(e) => {
          e.preventDefault();
          history.replaceState(null, "", "/apps/" + appID + "/plan" + (rev ? "?revision=" + rev : ""));
          run(rev);
        }}
      >
        <label for="plan-revision">Revision</label>
        <select id="plan-revision" name="revision" value={rev} onChange={(e) => setRev((e.currentTarget as HTMLSelectElement).value)}>
          <option value="">{r.pinned ? "the pinned one (" + r.pinned + ")" : "the pinned one"}</option>
          {rev && !(r.items ?? []).some((s) => String(s.revision) === rev) && <option value={rev}>{rev}</option>}
          {(r.items ?? []).map((s) => (
            <option key={s.revision} value={String(s.revision)}>
              {s.revision}
              {s.pinned ? " (pinned)" : ""}
            </option>
          ))}
        </select>
        <button type="submit" class="primary" disabled={busy} aria-busy={busy}>
          Plan
        </button>
        <span class="hint">What a deploy would do, and every reason it would be refused. Planning changes nothing.</span>
      </form>
      <ErrorNote error={error ?? r.error} />
      <section aria-labelledby="plan-h" class="block" data-deployable={res ? String(res.deployable) : ""} data-planned={planned ?? ""}>
        <h2 id="plan-h">{planned ? "A deploy of revision " + planned : "A deploy"}</h2>
        <p class="plan-verdict" role="status" aria-live="polite">
          {!res ? (
            busy ? "Planning…" : " "
          ) : res.deployable ? (
            <>
              <span class="pill pill-ok">deployable</span> It would run on the runtime <code>{res.runtime}</code>
              {res.warnings.length > 0 ? ", with " + res.warnings.length + (res.warnings.length === 1 ? " warning" : " warnings") + " below" : ""}.
            </>
          ) : (
            <>
              <span class="pill pill-bad">refused</span> {res.refusals.length === 1 ? "One reason keeps" : res.refusals.length + " reasons keep"} it from deploying; each says what to do.
            </>
          )}
        </p>
        {res?.deployable && (
          <div class="actions">
            <button type="button" class="primary" onClick={deploy} disabled={deploying} aria-busy={deploying}>
              Deploy revision {planned}
            </button>
            <span class="hint">Builds and runs it now; follow it on the Deploys page.</span>
          </div>
        )}
        {res && res.refusals.length > 0 && (
          <>
            <h3 id="refusals-h">Why it would be refused</h3>
            <ul class="plan-refusals" aria-labelledby="refusals-h">
              {res.refusals.map((f, i) => (
                <li key={i} data-code={f.code}>
                  <ProblemNote problem={f} />
                </li>
              ))}
            </ul>
            {planned && (
              <p class="small">
                Change the spec in a <Link href={"/apps/" + appID + "/spec/" + planned + "/edit"}>new revision from {planned}</Link>, or fill what it needs on the{" "}
                <Link href={"/apps/" + appID + "/slots"}>Slots</Link> page, then plan again.
              </p>
            )}
          </>
        )}
        {res && res.warnings.length > 0 && (
          <>
            <h3 id="warnings-h">Warnings (they never block)</h3>
            <ul class="plan-warnings" aria-labelledby="warnings-h">
              {res.warnings.map((w, i) => (
                <li key={i} data-code={w.code}>
                  {w.message} <code class="small">{w.code}</code>
                </li>
              ))}
            </ul>
          </>
        )}
        {res && (
          <>
            <h3 id="steps-h">What it would do</h3>
            {res.actions.length === 0 ? (
              <p class="muted">Nothing: the revision has no workloads.</p>
            ) : (
              <table class="list" data-table="plan-actions" aria-labelledby="steps-h">
                <thead>
                  <tr>
                    <th scope="col">Step</th>
                    <th scope="col">Workload</th>
                    <th scope="col">What</th>
                  </tr>
                </thead>
                <tbody>
                  {res.actions.map((a, i) => (
                    <tr key={i}>
                      <td>{a.step === "build" ? "Build" : a.step === "start" ? "Start" : a.step}</td>
                      <th scope="row">{a.workload}</th>
                      <td>{a.detail ? <code>{a.detail}</code> : "—"}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          </>
        )}
      </section>
    </div>
  );
}
