import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { all, API, ApiError, call, refusal, seg, type Deployment } from "../api";
import { Link, navigate } from "../router";
import { Confirm, ErrorNote, usePoll, when } from "../ui";
import { StateBadge } from "./apps";

// The deploys page, /apps/<app ID>/deploys[/<deployment ID>]: the history
// (GET …/deployments, newest first), a new deploy (POST …/deployments),
// roll back (POST …/deployments/rollback), and the deployment the address
// names: its facts, approve or reject while it waits for approval, and its
// log streaming live over server-sent events (GET …/deployments/{id}/logs)
// until its outcome.

const finished = new Set(["succeeded", "failed", "rejected", "superseded", "canceled"]);

export function Deploys(props: { appID: string; depID: string; onChanged: () => Promise<void> }) {
  const { appID, depID } = props;
  const base = "/apps/" + seg(appID) + "/deployments";
  const [items, setItems] = useState<Deployment[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [revision, setRevision] = useState("");
  const [busy, setBusy] = useState(false);
  const [asking, setAsking] = useState(false);
  const load = useCallback(async () => {
    try {
      setItems(await all<Deployment>(base));
    } catch (e) {
      setError(e);
    }
  }, [base]);
  usePoll(load, 3000, [load]);

  const start = async (method: "deploy" | "rollback") => {
    setAsking(false);
    setBusy(true);
    setError(null);
    try {
      const body = method === "deploy" ? (revision.trim() ? { revision: Number(revision.trim()) } : {}) : undefined;
      const d = await call<{ deployment: Deployment }>("POST", method === "deploy" ? base : base + "/rollback", body);
      setRevision("");
      await load();
      navigate("/apps/" + appID + "/deploys/" + d.deployment.id);
      props.onChanged();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  return (
    <div class="deploys">
      <div class="actions">
        <form
          class="inline-form"
          onSubmit={(e) => {
            e.preventDefault();
            start("deploy");
          }}
        >
          <label for="revision">Revision</label>
          <input id="revision" name="revision" inputMode="numeric" pattern="[0-9]*" placeholder="pinned" value={revision} onInput={(e) => setRevision((e.currentTarget as HTMLInputElement).value)} aria-describedby="revision-hint" />
          <button type="submit" class="primary" disabled={busy} aria-busy={busy}>
            Deploy
          </button>
          <span id="revision-hint" class="hint">
            Leave empty to deploy the pinned revision.
          </span>
        </form>
        <button type="button" disabled={busy} onClick={() => setAsking(true)}>
          Roll back
        </button>
      </div>
      {asking && (
        <Confirm title="Roll back?" action="Roll back" danger onConfirm={() => start("rollback")} onCancel={() => setAsking(false)}>
          <p>The last release that ran successfully before the current one ships again, exactly as it ran: its revision, its source and its builds.</p>
        </Confirm>
      )}
      <ErrorNote error={error} />
      {depID && <Detail key={depID} appID={appID} depID={depID} fromList={items?.find((d) => d.id === depID)} onChanged={load} />}
      <section aria-labelledby="history-h" class="block">
        <h2 id="history-h">History</h2>
        {items === null ? (
          <p class="placeholder" aria-busy="true">
            Reading deploys…
          </p>
        ) : items.length === 0 ? (
          <div class="empty-state small">
            <p>No deploys yet. Deploy the pinned revision with the Deploy button above. A new app has a revision to deploy once detection’s proposal is accepted (svc launch does that for you).</p>
          </div>
        ) : (
          <table class="list" data-table="deploys">
            <caption class="visually-hidden">Deploys, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Deploy</th>
                <th scope="col">Revision</th>
                <th scope="col">State</th>
                <th scope="col">Trigger</th>
                <th scope="col">Asked</th>
                <th scope="col">Finished</th>
              </tr>
            </thead>
            <tbody>
              {items.map((d) => (
                <tr key={d.id} data-deploy={d.id} class={d.id === depID ? "selected" : ""}>
                  <td>
                    <Link href={"/apps/" + appID + "/deploys/" + d.id} aria-current={d.id === depID ? "true" : undefined}>
                      <code>{d.id}</code>
                    </Link>
                  </td>
                  <td>{d.revision}</td>
                  <td>
                    <StateBadge state={d.state} />
                  </td>
                  <td>{d.redeploys ? "rollback" : d.trigger}</td>
                  <td>{when(d.created_at)}</td>
                  <td>{when(d.finished_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
    </div>
  );
}

interface LogLine {
  stream: string;
  line: string;
}

/** Detail is one deployment: facts, approval, and its live log. */
function Detail(props: { appID: string; depID: string; fromList?: Deployment; onChanged: () => Promise<void> }) {
  const path = "/apps/" + seg(props.appID) + "/deployments/" + seg(props.depID);
  const [dep, setDep] = useState<Deployment | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [lines, setLines] = useState<LogLine[]>([]);
  const [end, setEnd] = useState<{ state: string; error_code?: string | null } | null>(null);
  const [streamError, setStreamError] = useState<unknown>(null);
  const [reason, setReason] = useState("");
  const [busy, setBusy] = useState(false);
  const logRef = useRef<HTMLPreElement>(null);

  const reload = useCallback(async () => {
    try {
      setDep((await call<{ deployment: Deployment }>("GET", path)).deployment);
    } catch (e) {
      setError(e);
    }
  }, [path]);
  useEffect(() => {
    reload();
  }, [reload]);
  // The list polls: a state it sees changed is read again in full.
  useEffect(() => {
    if (props.fromList && dep && props.fromList.state !== dep.state) reload();
  }, [props.fromList?.state]);

  // The log: replayed whole, then live; the end event closes it (an
  // EventSource would otherwise reconnect and replay it again).
  useEffect(() => {
    const es = new EventSource(API + path + "/logs");
    let opened = 0;
    es.onopen = () => {
      if (opened++ > 0) setLines([]); // a reconnect replays the log from its start
      setStreamError(null);
    };
    es.addEventListener("log", (e) => {
      const v = JSON.parse((e as MessageEvent).data) as LogLine;
      setLines((ls) => [...ls, { stream: v.stream, line: v.line }]);
    });
    es.addEventListener("end", (e) => {
      setEnd(JSON.parse((e as MessageEvent).data));
      es.close();
      reload();
      props.onChanged();
    });
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) {
        refusal(path + "/logs").then((r) => setStreamError(r ?? new ApiError(0, "NETWORK", "The log stream was cut off.", "Reload the page to read it again.")));
      }
    };
    return () => es.close();
  }, [path]);

  // Keep the newest line in view while the reader is at the bottom.
  useEffect(() => {
    const el = logRef.current;
    if (el && el.scrollHeight - el.scrollTop - el.clientHeight < 80) el.scrollTop = el.scrollHeight;
  }, [lines.length]);

  const decide = async (verb: "approve" | "reject") => {
    setBusy(true);
    setError(null);
    try {
      const d = await call<{ deployment: Deployment }>("POST", path + "/" + verb, verb === "reject" ? { reason: reason.trim() } : undefined);
      setDep(d.deployment);
      setReason("");
      await props.onChanged();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  const d = dep;
  const outcome = end?.state ?? (d && finished.has(d.state) ? d.state : null);
  return (
    <section class="block deploy-detail" aria-labelledby="deploy-h" data-deploy-detail={props.depID}>
      <h2 id="deploy-h">
        Deploy <code>{props.depID}</code> {d && <StateBadge state={d.state} />}
      </h2>
      <dl class="facts">
        <dt>Revision</dt>
        <dd>{d ? d.revision : "…"}</dd>
        <dt>Asked</dt>
        <dd>{d ? when(d.created_at) : "…"}</dd>
        <dt>Trigger</dt>
        <dd>{d ? (d.redeploys ? "rollback of " + d.redeploys : d.trigger) : "…"}</dd>
        <dt>Approvals</dt>
        <dd>{d ? (d.approvals_required > 0 ? (d.approvals?.length ?? 0) + " of " + d.approvals_required : "none needed") : "…"}</dd>
      </dl>
      {d?.rejected_reason && (
        <p>
          Rejected: <q>{d.rejected_reason}</q>
        </p>
      )}
      <ErrorNote error={error} />
      {d?.state === "waiting_approval" && (
        <div class="approval panel" role="group" aria-labelledby="approval-h">
          <h3 id="approval-h">This deploy waits for approval</h3>
          {d.approval_reasons && d.approval_reasons.length > 0 && (
            <ul>
              {d.approval_reasons.map((r) => (
                <li key={r}>{r}</li>
              ))}
            </ul>
          )}
          <p class="hint">Someone other than the person who asked for it approves it; once it has {d.approvals_required} approval(s) it is queued.</p>
          <div class="inline-form">
            <button type="button" class="primary" name="approve" disabled={busy} onClick={() => decide("approve")}>
              Approve
            </button>
          </div>
          <form
            class="inline-form"
            onSubmit={(e) => {
              e.preventDefault();
              decide("reject");
            }}
          >
            <label for="reject-reason">Reason to reject</label>
            <input id="reject-reason" name="reject_reason" required maxLength={1000} value={reason} onInput={(e) => setReason((e.currentTarget as HTMLInputElement).value)} />
            <button type="submit" class="danger" disabled={busy}>
              Reject
            </button>
          </form>
        </div>
      )}
      <h3 id="log-h">Log</h3>
      <pre class="log" ref={logRef} role="log" aria-labelledby="log-h" tabIndex={0} data-lines={lines.length}>
        {lines.length === 0 && !outcome ? <span class="muted">{d?.state === "waiting_approval" ? "The log begins once the deploy is approved." : "Waiting for output…"}</span> : null}
        {lines.map((l, i) => (
          <span key={i} class={"ln ln-" + l.stream}>
            <span class="stream">{l.stream}</span> {l.line}
            {"\n"}
          </span>
        ))}
      </pre>
      <ErrorNote error={streamError} />
      <p class="outcome" role="status" aria-live="polite" data-outcome={outcome ?? ""}>
        {outcome ? (
          <>
            The deploy {outcome === "waiting_approval" ? "waits for approval" : "ended"}: <StateBadge state={outcome} />
            {(end?.error_code || d?.error_code) && (
              <>
                {" "}
                <code>{end?.error_code || d?.error_code}</code> {d?.error_message}
              </>
            )}
          </>
        ) : d ? (
          d.state === "waiting_approval" ? "Waiting for approval." : "In progress…"
        ) : (
          " "
        )}
      </p>
    </section>
  );
}
