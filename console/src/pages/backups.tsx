import { Fragment, type ComponentChildren } from "preact";
import { useCallback, useEffect, useState } from "preact/hooks";
import { all, call, seg } from "../api";
import { Confirm, ErrorNote, ListTable, ProblemNote, bytes, when } from "../ui";
import "./backups.css";

// What the app's Volumes tab and the installation's Storage page
// (/admin/storage) share: the API's shapes of volumes and backups, a
// volume's use as a bar, and the list of backups (GET /api/v1/backups,
// newest first; install.backup.manage) with Verify (POST
// /backups/{id}/verify) and Restore behind a confirmation (POST
// /apps/{id}/restore on the app's tab, POST /backups/{id}/restore on the
// installation's page). The list is read again every second while a
// backup is pending or running, every ten seconds otherwise.

/** VolumeView is a volume as GET …/volumes answers it. */
export interface VolumeView {
  /** null: declared in a spec no deploy has mounted yet. */
  id: string | null;
  app_id: string;
  /** The app's slug, when the API says it (a deleted app's). */
  app_slug?: string;
  name: string;
  size_bytes: number;
  used_bytes: number | null;
  mounts: { workload: string; path: string }[];
  created_at: string | null;
  app_gone_at: string | null;
}

/** BackupProblem is a backup's failure or a verification's problem. */
export interface BackupProblem {
  code: string;
  message: string;
  remedy?: string;
}

/** Backup is a backup as the API answers it. */
export interface Backup {
  id: string;
  kind: "rolling" | "on_delete" | "dr_bundle";
  app_id: string | null;
  app_slug?: string;
  state: "pending" | "running" | "completed" | "failed";
  size_bytes: number;
  plain_bytes: number;
  volumes: { id: string; name: string; size_bytes: number; app_id?: string }[] | null;
  scheduled: boolean;
  /** store is what an installation bundle saved of the store: its index and digest. */
  store?: { applied: number; digest: string; history_records: number };
  consistency?: string;
  created_at: string;
  completed_at: string | null;
  verified_at: string | null;
  error: BackupProblem | null;
}

/** Verified is POST /backups/{id}/verify's answer. */
export interface Verified {
  backup: Backup;
  ok: boolean;
  problems: BackupProblem[] | null;
}

/** unfinished says whether a backup is still being taken. */
export function unfinished(b: Backup): boolean {
  return b.state === "pending" || b.state === "running";
}

/** UsedBar shows what a volume holds against its size. */
export function UsedBar(props: { name: string; used: number | null; size: number }) {
  const { used, size } = props;
  if (used === null) {
    return (
      <span class="meter used">
        <span class="meter-text muted">not measured yet</span>
      </span>
    );
  }
  const exact = size > 0 ? (used / size) * 100 : 0;
  const p = Math.min(100, Math.round(exact));
  const said = used > 0 && p === 0 ? "under 1%" : p + "%";
  return (
    <span class="meter used" data-used={used}>
      <span class="meter-text">
        {bytes(used)} of {bytes(size)}
      </span>
      <progress max={100} value={Math.min(100, exact)} aria-label={"Volume " + props.name + " used: " + said} class={p >= 90 ? "hot" : ""} />
    </span>
  );
}

/**
 * useBackups reads a list of backups (path: /backups and its query; null
 * reads nothing) and keeps reading it: every second while one is pending
 * or running, every ten seconds otherwise. reload reads it now.
 */
export function useBackups(path: string | null): { items: Backup[] | null; error: unknown; reload: () => void } {
  const [answer, setAnswer] = useState<{ path: string; items: Backup[] | null; error: unknown } | null>(null);
  const [nonce, setNonce] = useState(0);
  useEffect(() => {
    if (path === null) return;
    let live = true;
    let timer = 0;
    const tick = async () => {
      let busy = false;
      try {
        const items = await all<Backup>(path);
        busy = items.some(unfinished);
        if (live) setAnswer({ path, items, error: null });
      } catch (e) {
        if (live) setAnswer((a) => ({ path, items: a?.path === path ? a.items : null, error: e }));
      }
      if (live) timer = window.setTimeout(tick, busy ? 1000 : 10000);
    };
    tick();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [path, nonce]);
  const reload = useCallback(() => setNonce((n) => n + 1), []);
  const mine = answer && answer.path === path ? answer : null;
  return { items: mine?.items ?? null, error: mine?.error ?? null, reload };
}

const kinds: Record<string, string> = {
  rolling: "rolling",
  on_delete: "final, at deletion",
  dr_bundle: "installation bundle",
};

/** kindOf says a backup's kind in words. */
export function kindOf(b: Backup): string {
  if (b.kind === "rolling") return b.scheduled ? "rolling (hourly)" : "rolling (asked for)";
  if (b.kind === "dr_bundle" && b.scheduled) return "installation bundle (scheduled)";
  return kinds[b.kind] ?? b.kind;
}

const consistencies: Record<string, string> = {
  paused: "app paused for the copy",
  stopped: "app ran nothing",
  live: "copied while running",
};

const pills: Record<string, string> = { completed: "ok", failed: "bad", pending: "busy", running: "busy" };

/** Restorer says how a backup is restored from this page: its request and the app's name. */
export type Restorer = (b: Backup) => { method: string; path: string; body?: unknown; app: string };

interface RowNote {
  busy?: "verify" | "restore";
  verified?: Verified;
  restoring?: boolean;
  error?: unknown;
}

/**
 * BackupTable lists backups (null: a placeholder row): when each was
 * taken and its kind, its state and when it finished (a failed one's
 * error below it), size, consistency and verification; Verify and Restore (restore null: not offered) on a
 * completed one. app fills an App column (the installation's page).
 */
export function BackupTable(props: { items: Backup[] | null; caption: string; app?: (b: Backup) => ComponentChildren; restore: Restorer | null; onChanged: () => void }) {
  const { items, restore } = props;
  const [notes, setNotes] = useState<Record<string, RowNote>>({});
  const [asking, setAsking] = useState<Backup | null>(null);
  const note = (id: string, n: RowNote) => setNotes((all) => ({ ...all, [id]: n }));
  const columns = ["Backup", ...(props.app ? ["App"] : []), "State", "Size", "Consistency", "Verified", ""];

  const verify = async (b: Backup) => {
    note(b.id, { busy: "verify" });
    try {
      note(b.id, { verified: await call<Verified>("POST", "/backups/" + seg(b.id) + "/verify") });
      props.onChanged();
    } catch (e) {
      note(b.id, { error: e });
    }
  };
  const doRestore = async (b: Backup) => {
    setAsking(null);
    if (!restore) return;
    const r = restore(b);
    note(b.id, { busy: "restore" });
    try {
      await call(r.method, r.path, r.body);
      note(b.id, { restoring: true });
    } catch (e) {
      note(b.id, { error: e });
    }
  };

  return (
    <>
      <ListTable name="backups" caption={props.caption} columns={columns} fixed>
        {items?.map((b) => {
          const n = notes[b.id] ?? {};
          const done = b.state === "completed";
          const extra = b.error || n.verified || n.restoring || n.error;
          return (
            <Fragment key={b.id}>
              <tr data-backup={b.id} data-state={b.state} data-kind={b.kind} class={extra ? "has-note" : ""}>
                <td>
                  <span class="backup-when">{when(b.created_at)}</span>
                  <span class="backup-kind small">{kindOf(b)}</span>
                  <code class="backup-id">{b.id}</code>
                </td>
                {props.app && <td>{props.app(b)}</td>}
                <td>
                  <span class={"pill pill-" + (pills[b.state] ?? "plain")}>{b.state}</span>
                  {(b.state === "completed" || b.state === "failed") && b.completed_at && <span class="muted small block-line">{when(b.completed_at)}</span>}
                </td>
                <td>
                  {done ? (
                    <>
                      {bytes(b.size_bytes)}
                      <span class="muted small block-line">holds {bytes(b.plain_bytes)}</span>
                    </>
                  ) : (
                    "—"
                  )}
                </td>
                <td>
                  {b.consistency ? (
                    <>
                      {b.consistency}
                      <span class="muted small block-line">{consistencies[b.consistency] ?? ""}</span>
                    </>
                  ) : (
                    "—"
                  )}
                </td>
                <td>{b.verified_at ? when(b.verified_at) : done ? "not yet" : "—"}</td>
                <td class="row-actions">
                  {done && (
                    <>
                      <button type="button" class="small" disabled={!!n.busy} aria-busy={n.busy === "verify"} onClick={() => verify(b)}>
                        Verify
                      </button>
                      {restore && b.kind !== "dr_bundle" && (
                        <button type="button" class="small" disabled={!!n.busy} aria-busy={n.busy === "restore"} onClick={() => setAsking(b)}>
                          Restore
                        </button>
                      )}
                    </>
                  )}
                  {unfinished(b) && <span class="muted small">being taken…</span>}
                  {done && b.kind === "dr_bundle" && (
                    <span class="muted small block-line bundle-how" title={b.store ? "store at index " + b.store.applied + ", digest " + b.store.digest : undefined}>
                      restored into a new installation with <code>svc restore --bundle {b.id}</code>
                    </span>
                  )}
                </td>
              </tr>
              {extra && (
                <tr class="backup-note" data-note-for={b.id}>
                  <td colSpan={columns.length}>
                    {b.error && (
                      <div class="backup-failed">
                        <p class="small muted">Why this backup failed:</p>
                        <ProblemNote problem={b.error} />
                      </div>
                    )}
                    {n.verified && <VerifyOutcome v={n.verified} />}
                    {n.restoring && (
                      <p class="restore-started" role="status">
                        Restore started: the app is paused, its volumes’ data is swapped for this backup’s, and it is restarted on it. Its events say when it is done (app.data_restored).
                      </p>
                    )}
                    {!!n.error && <ErrorNote error={n.error} />}
                  </td>
                </tr>
              )}
            </Fragment>
          );
        })}
      </ListTable>
      {asking && restore && (
        <Confirm title={"Restore " + restore(asking).app + " from this backup?"} action="Restore" danger onConfirm={() => doRestore(asking)} onCancel={() => setAsking(null)}>
          <p>
            The app is paused, the data now in its volumes{asking.volumes && asking.volumes.length > 0 ? " (" + asking.volumes.map((v) => v.name).join(", ") + ")" : ""} is replaced by
            this backup’s, taken {when(asking.created_at)}, and the app is restarted on it. Whatever was written to them since is lost.
          </p>
          <p>The backup is read back whole first: an incomplete or undecryptable one is refused before anything changes.</p>
        </Confirm>
      )}
    </>
  );
}

/** VerifyOutcome says what a verification found. */
function VerifyOutcome(props: { v: Verified }) {
  const problems = props.v.problems ?? [];
  if (props.v.ok) {
    return (
      <p class="verify-ok" role="status">
        Verified: every part was read back from the backup storage, decrypted and checked; nothing live was touched.
      </p>
    );
  }
  return (
    <div class="verify-bad" role="status">
      <p>
        Verification found {problems.length === 1 ? "a problem" : problems.length + " problems"}: this backup would be refused, not restored.
      </p>
      {problems.map((p, i) => (
        <ProblemNote key={i} problem={p} />
      ))}
    </div>
  );
}
