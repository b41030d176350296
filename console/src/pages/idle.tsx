import { useCallback, useEffect, useState } from "preact/hooks";
import { call } from "../api";
import { Link } from "../router";
import { Confirm, ErrorNote, useSubmit } from "../ui";
import { specsPath, type SpecList, type SpecView } from "./specdoc";
import "./idle.css";

// "When idle", on an app's settings page: the spec document's
// lifecycle: {idle_days, idle_action: stop|delete} (0 or absent: never),
// read from the latest revision (GET …/specs?limit=1, GET …/specs/{rev})
// and saved as the next revision with only the lifecycle changed
// (POST …/specs {"spec": document}): like every revision, it applies once
// it is pinned and deployed. Delete is warned and confirmed.

type Action = "stop" | "delete";

interface Lifecycle {
  idle_days?: number;
  idle_action?: Action;
}

const maxDays = 3650;
const editVerb = "app.spec.edit";

export function IdleSettings(props: { appID: string; verbs: string[] | null }) {
  const { appID } = props;
  const [latest, setLatest] = useState<SpecView | null | undefined>(undefined);
  const [readError, setReadError] = useState<unknown>(null);
  const [days, setDays] = useState("");
  const [action, setAction] = useState<Action>("stop");
  const [saved, setSaved] = useState<{ revision: number; says: string } | null>(null);
  const [confirming, setConfirming] = useState(false);

  const read = useCallback(async () => {
    try {
      const l = await call<SpecList>("GET", specsPath(appID) + "?limit=1");
      const n = l.items[0]?.revision;
      if (n === undefined) {
        setLatest(null);
        return;
      }
      const v = await call<{ spec: SpecView }>("GET", specsPath(appID) + "/" + n);
      setLatest(v.spec);
      const lc = (v.spec.spec.lifecycle ?? {}) as Lifecycle;
      setDays(lc.idle_days ? String(lc.idle_days) : "");
      setAction(lc.idle_action === "delete" ? "delete" : "stop");
    } catch (e) {
      setReadError(e);
      setLatest(null);
    }
  }, [appID]);
  useEffect(() => {
    read();
  }, [read]);

  const n = days.trim() === "" ? 0 : Number(days.trim());
  const valid = Number.isInteger(n) && n >= 0 && n <= maxDays;
  const current = (latest?.spec.lifecycle ?? {}) as Lifecycle;
  const form = useSubmit(async () => {
    if (!latest || !valid) return;
    const doc: Record<string, unknown> = { ...latest.spec };
    if (n === 0) delete doc.lifecycle;
    else doc.lifecycle = { idle_days: n, idle_action: action };
    const v = await call<{ spec: SpecView }>("POST", specsPath(appID), { spec: doc });
    setLatest(v.spec);
    setSaved({ revision: v.spec.revision, says: says(n, action) });
  });
  const submit = (e: Event) => {
    e.preventDefault();
    setSaved(null);
    if (n > 0 && action === "delete" && !(current.idle_action === "delete" && current.idle_days === n)) {
      setConfirming(true);
      return;
    }
    form.onSubmit(e);
  };
  const mayEdit = props.verbs?.includes(editVerb) ?? true;

  return (
    <section class="block panel idle-settings" aria-labelledby="idle-h">
      <h2 id="idle-h">When idle</h2>
      <p class="muted small">
        An app nobody sends a request to (through its address) for this many days is stopped, or deleted. Its owner is warned a day before. Empty or 0: never.
      </p>
      <ErrorNote error={readError} />
      <form onSubmit={submit} aria-describedby="idle-error" aria-busy={latest === undefined}>
        <div class="idle-fields">
          <div class="field">
            <label for="idle-days">Days without a request</label>
            <input
              id="idle-days"
              name="idle_days"
              type="number"
              inputMode="numeric"
              min={0}
              max={maxDays}
              step={1}
              placeholder="never"
              value={days}
              aria-invalid={!valid}
              aria-describedby="idle-days-hint"
              onInput={(e) => setDays((e.currentTarget as HTMLInputElement).value)}
            />
            <p class="hint" id="idle-days-hint">
              0 to {maxDays}; empty or 0 turns it off.
            </p>
          </div>
          <fieldset class="idle-action" disabled={n === 0}>
            <legend>Then</legend>
            <label>
              <input type="radio" name="idle_action" value="stop" checked={action === "stop"} onChange={() => setAction("stop")} /> Stop it (it stays stopped until started)
            </label>
            <label>
              <input type="radio" name="idle_action" value="delete" checked={action === "delete"} onChange={() => setAction("delete")} /> Delete it
            </label>
          </fieldset>
        </div>
        {n > 0 && action === "delete" && (
          <p class="idle-warning" role="note">
            Deleting removes the app, its address, grants, secrets and revisions; apps with volumes get a final backup first. It cannot be undone.
          </p>
        )}
        <p class="muted small" data-idle-now={current.idle_days ?? 0}>
          {latest === undefined
            ? " "
            : latest === null
              ? "The app has no spec revision yet: write one on its Spec page first."
              : "Revision " + latest.revision + " (the latest) says: " + says(current.idle_days ?? 0, current.idle_action === "delete" ? "delete" : "stop") + "."}
        </p>
        {!mayEdit && (
          <p class="hint" data-no-edit>
            Saving writes a spec revision, which needs the <code>{editVerb}</code> verb on the app; you may read it only.
          </p>
        )}
        <ErrorNote error={form.error} id="idle-error" />
        <div class="inline-form">
          <button type="submit" class="primary" disabled={form.busy || !latest || !valid} aria-busy={form.busy}>
            Save as a new revision
          </button>
          <span class="muted" role="status" aria-live="polite" data-idle-saved={saved?.revision ?? ""}>
            {saved && (
              <>
                Saved as revision {saved.revision}: {saved.says}. It applies once that revision is pinned and deployed (<Link href={"/apps/" + appID + "/spec/" + saved.revision}>revision {saved.revision}</Link>).
              </>
            )}
          </span>
        </div>
      </form>
      {confirming && (
        <Confirm
          title="Delete the app when it is idle?"
          action={"Delete after " + n + (n === 1 ? " idle day" : " idle days")}
          danger
          onConfirm={() => {
            setConfirming(false);
            form.onSubmit(new Event("submit"));
          }}
          onCancel={() => setConfirming(false)}
        >
          <p>
            After {n} {n === 1 ? "day" : "days"} without a request, the app is deleted, not stopped: its address, grants, secrets and revisions go, and its volumes only survive in the final backup.
            Its owner is warned a day before.
          </p>
        </Confirm>
      )}
    </section>
  );
}

function says(days: number, action: Action): string {
  if (!days) return "never stopped or deleted for idleness";
  return (action === "delete" ? "deleted" : "stopped") + " after " + days + (days === 1 ? " day" : " days") + " without a request";
}

const stoppedSays: Record<string, { title: string; says: string }> = {
  idle: {
    title: "Stopped for idleness",
    says: "No request reached it for the days its spec’s lifecycle sets (When idle, on its Settings page). It stays stopped until someone starts it.",
  },
  insecure: {
    title: "Stopped for its security score",
    says: "Its security score stayed below the host’s minimum past the grace period (see its Security tab). It stays stopped until someone starts it; a scan at or above the minimum lets it deploy again.",
  },
  disk_limit: {
    title: "Stopped over its disk limit",
    says: "A workload wrote more than its resources.disk_bytes allows (see its usage). It stays stopped until someone starts it; free space or raise the limit first.",
  },
};

/**
 * StoppedBecause says why an app meant to be stopped was stopped by svc
 * itself (for idleness, a security score below the host minimum, or its
 * disk limit), from the app's stopped_because (GET /apps/{id}, read again
 * whenever the desired state changes), with a Start button. A stop by a
 * person shows nothing.
 */
export function StoppedBecause(props: { appID: string; desired: string | undefined; onStart: () => void }) {
  const [because, setBecause] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    call<{ app: { stopped_because: string | null } }>("GET", "/apps/" + encodeURIComponent(props.appID)).then(
      (r) => live && setBecause(r.app.stopped_because),
      () => live && setBecause(null),
    );
    return () => {
      live = false;
    };
  }, [props.appID, props.desired]);
  const note = because ? stoppedSays[because] : undefined;
  if (!note) return null;
  return (
    <div class="notice stopped-because" role="status" data-stopped-because={because}>
      <p>
        <strong>{note.title}</strong>. {note.says}
      </p>
      <button type="button" onClick={props.onStart}>
        Start
      </button>
    </div>
  );
}
