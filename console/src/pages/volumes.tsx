import { useCallback, useEffect, useState } from "preact/hooks";
import { all, call, seg, type App, type Me } from "../api";
import { Link } from "../router";
import { ErrorNote, Field, ListTable, Notice, bytes, usePoll } from "../ui";
import type { AppPageProps } from "./app";
import { BackupTable, UsedBar, unfinished, useBackups, type Backup, type VolumeView } from "./backups";
import { specsPath, workloadsOf, type SpecList, type SpecView } from "./specdoc";
import "./specs.css";
import "./volumes.css";

// The volumes, /apps/<app ID>/volumes: the app's storage as the pinned
// revision declares it (GET …/volumes: ID — null until a deploy or a
// declaration makes the volume —, size, what it holds, mounts; read again
// every five seconds); declaring one (POST …/volumes), which writes a new
// revision from the latest that is neither pinned nor deployed, or taking
// over a kept volume of a deleted app of the same slug (volume_id, for
// those holding install.backup.manage, from GET /api/v1/volumes); and the
// app's backups (GET /api/v1/backups?app_id=…, install.backup.manage):
// Back up now (POST /backups, followed until completed or failed), Verify,
// and Restore (POST …/restore, app.deploy) behind a confirmation.

const units: { label: string; bytes: number }[] = [
  { label: "MiB", bytes: 1 << 20 },
  { label: "GiB", bytes: 1 << 30 },
  { label: "TiB", bytes: 1024 * (1 << 30) },
];

/** ManageVerb is the installation verb that lists, takes and restores backups, and takes kept volumes over. */
export const ManageVerb = "install.backup.manage";

export function Volumes(props: AppPageProps) {
  const { appID } = props;
  // The installation's verbs (backups and kept volumes are the
  // installation's): undefined until read, null when they cannot be.
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  useEffect(() => {
    call<Me>("GET", "/me").then(setMe, () => setMe(null));
  }, []);
  const manages = me === undefined ? undefined : !!me?.verbs.includes(ManageVerb);
  const [items, setItems] = useState<VolumeView[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const load = useCallback(async () => {
    try {
      setItems(await all<VolumeView>("/apps/" + seg(appID) + "/volumes"));
      setError(null);
    } catch (e) {
      setError(e);
    }
  }, [appID]);
  // What a volume holds changes as the app writes.
  usePoll(load, 5000, [load]);

  // Until the verbs are known the page is one placeholder: what it offers
  // depends on them, and nothing moves when it appears.
  if (manages === undefined) {
    return (
      <div class="volumes">
        <p class="placeholder tall" aria-busy="true">
          Reading volumes…
        </p>
      </div>
    );
  }
  return (
    <div class="volumes">
      <section aria-labelledby="volumes-h" class="block">
        <h2 id="volumes-h">Volumes</h2>
        <p class="muted small">Paths kept between deploys, as the pinned revision declares them; data written anywhere else is discarded at the next deploy.</p>
        <ErrorNote error={error} />
        <VolumeList items={items} />
      </section>
      <Declare appID={appID} app={props.app} manages={manages} onDeclared={load} />
      <AppBackups appID={appID} app={props.app} verbs={props.verbs} manages={manages} />
    </div>
  );
}

function VolumeList(props: { items: VolumeView[] | null }) {
  const { items } = props;
  return (
    <div class="volume-list">
      <ListTable name="volumes" caption="Volumes" columns={["Volume", "ID", "Size", "Used", "Mounted"]} fixed>
        {items !== null && items.length === 0 ? (
          <tr class="empty-row">
            <td colSpan={5}>No volumes: everything the app writes is discarded at its next deploy. Declare one below for data it must keep.</td>
          </tr>
        ) : (
          items?.map((v) => (
            <tr key={v.name} data-volume={v.name} data-id={v.id ?? ""}>
              <th scope="row">{v.name}</th>
              <td>{v.id ? <code>{v.id}</code> : <span class="muted">made at the next deploy</span>}</td>
              <td>{bytes(v.size_bytes)}</td>
              <td>{v.id ? <UsedBar name={v.name} used={v.used_bytes} size={v.size_bytes} /> : <span class="muted">—</span>}</td>
              <td>
                {v.mounts.length === 0 ? (
                  <span class="muted">not mounted</span>
                ) : (
                  v.mounts.map((m, i) => (
                    <span key={i}>
                      {i > 0 && ", "}
                      <code>{m.path}</code> in {m.workload}
                    </span>
                  ))
                )}
              </td>
            </tr>
          ))
        )}
      </ListTable>
    </div>
  );
}

/** Kept is a kept volume this app may take over, with its deleted app's slug when known. */
interface Kept {
  volume: VolumeView;
  slug: string | null;
}

/**
 * keptVolumes reads the volumes kept after their app was deleted, with
 * the deleted app's slug: the volume's own when the API says it, else
 * from a backup of that app (backups carry their app's slug).
 */
async function keptVolumes(): Promise<Kept[]> {
  const [vols, backups] = await Promise.all([all<VolumeView>("/volumes"), all<Backup>("/backups").catch(() => [] as Backup[])]);
  const slugs: Record<string, string> = {};
  for (const b of backups) if (b.app_id && b.app_slug) slugs[b.app_id] = b.app_slug;
  return vols.filter((v) => v.app_gone_at && v.id).map((v) => ({ volume: v, slug: v.app_slug ?? slugs[v.app_id] ?? null }));
}

function Declare(props: { appID: string; app: App | null; manages: boolean; onDeclared: () => Promise<void> }) {
  const { appID, app, manages } = props;
  const [workloads, setWorkloads] = useState<string[] | null>(null);
  const [name, setName] = useState("");
  const [size, setSize] = useState("1");
  const [unit, setUnit] = useState("GiB");
  const [workload, setWorkload] = useState("");
  const [path, setPath] = useState("");
  const [takeover, setTakeover] = useState("");
  const [kept, setKept] = useState<Kept[] | null>(null);
  const [keptError, setKeptError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [formError, setFormError] = useState<unknown>(null);
  const [made, setMade] = useState<{ name: string; rev: number; id: string | null; takenOver: boolean } | null>(null);

  // The workloads a volume can be mounted in: the latest revision's, which
  // the new revision starts from.
  const loadWorkloads = useCallback(async () => {
    try {
      const l = await call<SpecList>("GET", specsPath(appID) + "?limit=1");
      const n = l.items[0]?.revision ?? null;
      if (n === null) {
        setWorkloads([]);
        return;
      }
      const v = await call<{ spec: SpecView }>("GET", specsPath(appID) + "/" + n);
      setWorkloads(workloadsOf(v.spec.spec));
    } catch (e) {
      setWorkloads([]);
      setFormError(e);
    }
  }, [appID]);
  useEffect(() => {
    loadWorkloads();
  }, [loadWorkloads]);
  const loadKept = useCallback(async () => {
    try {
      setKept(await keptVolumes());
      setKeptError(null);
    } catch (e) {
      setKept([]);
      setKeptError(e);
    }
  }, []);
  useEffect(() => {
    if (manages) loadKept();
  }, [manages, loadKept]);

  const slug = app?.slug ?? null;
  const candidates = (kept ?? []).filter((k) => k.slug === null || k.slug === slug);
  const others = (kept ?? []).length - candidates.length;
  const chosen = candidates.find((k) => k.volume.id === takeover) ?? null;

  const choose = (id: string) => {
    setTakeover(id);
    const k = candidates.find((c) => c.volume.id === id);
    if (k && name.trim() === "") setName(k.volume.name);
  };

  const declare = async (e: Event) => {
    e.preventDefault();
    if (busy) return;
    setBusy(true);
    setFormError(null);
    setMade(null);
    try {
      const body: Record<string, unknown> = { name: name.trim(), workload: workload || undefined, path: path.trim() };
      if (chosen) {
        body.volume_id = chosen.volume.id;
      } else if (size.trim() !== "") {
        const per = units.find((u) => u.label === unit)?.bytes ?? 1 << 30;
        body.size_bytes = Math.round(Number(size) * per);
      }
      const c = await call<{ volume: VolumeView; spec: { revision: number } }>("POST", "/apps/" + seg(appID) + "/volumes", body);
      setMade({ name: c.volume.name, rev: c.spec.revision, id: c.volume.id, takenOver: !!chosen });
      setName("");
      setPath("");
      setTakeover("");
      await Promise.all([loadWorkloads(), props.onDeclared(), manages ? loadKept() : Promise.resolve()]);
    } catch (err) {
      setFormError(err);
    } finally {
      setBusy(false);
    }
  };

  const spec = "/apps/" + appID + "/spec";
  return (
    <section aria-labelledby="declare-h" class="block">
      <h2 id="declare-h">Declare a volume</h2>
      <p class="muted small">
        This writes a new spec revision, the latest one with the volume and its mount. The new revision is neither pinned nor deployed: pin it, then deploy, for the app to have the
        volume.
      </p>
      <form class="panel volume-form" onSubmit={declare}>
        <Field label="Name" name="volume_name" value={name} onInput={setName} hint="A lower-case letter, then lower-case letters, digits and hyphens: data, uploads." />
        <div class="row">
          <div class="field size">
            <label for="volume-size">Size</label>
            <input
              id="volume-size"
              name="volume_size"
              type="number"
              min="1"
              step="any"
              placeholder="1"
              disabled={!!chosen}
              value={chosen ? "" : size}
              onInput={(e) => setSize((e.currentTarget as HTMLInputElement).value)}
              aria-describedby="volume-size-hint"
            />
          </div>
          <div class="field unit">
            <label for="volume-unit">Unit</label>
            <select id="volume-unit" name="volume_unit" value={unit} disabled={!!chosen} onChange={(e) => setUnit((e.currentTarget as HTMLSelectElement).value)}>
              {units.map((u) => (
                <option key={u.label} value={u.label}>
                  {u.label}
                </option>
              ))}
            </select>
          </div>
        </div>
        <p class="hint" id="volume-size-hint">
          {chosen ? "A volume taken over keeps its size, " + bytes(chosen.volume.size_bytes) + "." : "From 1 MiB to 10 TiB; 1 GiB when left empty."}
        </p>
        <div class="field">
          <label for="volume-workload">Workload</label>
          <select id="volume-workload" name="volume_workload" value={workload} onChange={(e) => setWorkload((e.currentTarget as HTMLSelectElement).value)}>
            <option value="">{workloads && workloads[0] ? "the primary (" + workloads[0] + ")" : "the primary"}</option>
            {(workloads ?? []).map((w) => (
              <option key={w} value={w}>
                {w}
              </option>
            ))}
          </select>
        </div>
        <Field label="Path" name="volume_path" value={path} onInput={setPath} hint="Where the workload sees it: an absolute path such as /data." />
        {manages ? (
            <div class="field takeover">
              <label for="volume-takeover">Take over a kept volume</label>
              <select id="volume-takeover" name="volume_takeover" value={takeover} disabled={kept === null} onChange={(e) => choose((e.currentTarget as HTMLSelectElement).value)} aria-describedby="volume-takeover-hint">
                <option value="">No: a new, empty volume</option>
                {candidates.map((k) => (
                  <option key={k.volume.id!} value={k.volume.id!}>
                    {k.volume.name} · {k.volume.id} · {bytes(k.volume.size_bytes)}
                    {k.volume.used_bytes !== null ? " (" + bytes(k.volume.used_bytes) + " used)" : ""} · {k.slug ? "from the deleted " + k.slug : "from a deleted app"}
                  </option>
                ))}
              </select>
              <p class="hint" id="volume-takeover-hint">
                A volume kept when its app was deleted (with a final backup) can be taken over with its data by a new app of the deleted app’s slug
                {slug ? (
                  <>
                    {" "}
                    (this one is <code>{slug}</code>)
                  </>
                ) : null}
                : it keeps its ID, data and size, and is mounted from the next deploy of the revision this writes. It needs <code>install.backup.manage</code>, which you hold: the data was
                another app’s.
                {kept !== null && candidates.length === 0 ? " No kept volume of a deleted app of this slug." : ""}
                {others > 0 ? " " + others + (others === 1 ? " kept volume belongs" : " kept volumes belong") + " to deleted apps of other slugs." : ""}
              </p>
              {!!keptError && <ErrorNote error={keptError} />}
            </div>
        ) : (
          <p class="hint takeover-who">Taking over a volume kept from a deleted app of this slug, with its data, needs install.backup.manage, which you do not hold.</p>
        )}
        <ErrorNote error={formError} />
        <div class="actions">
          <button type="submit" class="primary" disabled={busy} aria-busy={busy}>
            {chosen ? "Take the volume over" : "Declare the volume"}
          </button>
        </div>
      </form>
      {made && (
        <Notice>
          Revision {made.rev} declares <strong>{made.name}</strong>
          {made.takenOver && made.id ? (
            <>
              {" "}
              (the kept volume <code>{made.id}</code>, with its data)
            </>
          ) : null}
          ; it is neither pinned nor deployed. <Link href={spec + "/" + made.rev}>Pin revision {made.rev}</Link>, <Link href={"/apps/" + appID + "/plan?revision=" + made.rev}>see its plan</Link> or{" "}
          <Link href={spec + "/" + (made.rev - 1 || made.rev) + "/diff/" + made.rev}>what changes</Link>.
        </Notice>
      )}
    </section>
  );
}

/** AppBackups lists the app's backups and takes one now. */
function AppBackups(props: { appID: string; app: App | null; verbs: string[] | null; manages: boolean }) {
  const { appID, app, manages } = props;
  const { items, error, reload } = useBackups(manages ? "/backups?app_id=" + seg(appID) : null);
  const [taking, setTaking] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [postError, setPostError] = useState<unknown>(null);
  const mayRestore = !!props.verbs?.includes("app.deploy");
  const name = app?.name ?? appID;

  const backUp = async () => {
    if (busy) return;
    setBusy(true);
    setPostError(null);
    try {
      const r = await call<{ backup: Backup }>("POST", "/backups", { app_id: appID });
      setTaking(r.backup.id);
      reload();
    } catch (e) {
      setPostError(e);
    } finally {
      setBusy(false);
    }
  };
  const took = taking ? items?.find((b) => b.id === taking) : undefined;

  return (
    <section aria-labelledby="backups-h" class="block app-backups">
      <h2 id="backups-h">Backups</h2>
      {!manages ? (
        <div class="empty-state small backups-who">
          <p>
            The app’s backups are listed, taken and verified by people holding <code>install.backup.manage</code> (the installation’s administrators), which you do not hold. Ask one of them
            for a backup or a restore. Apps with volumes are also backed up every hour on their own.
          </p>
        </div>
      ) : (
        <>
          <p class="muted small">
            Encrypted copies of the app’s volumes, newest first: rolling ones (every hour, and when asked for), and the final one taken when an app is deleted with a backup. While a copy is
            taken the app is paused where its runtime can, so that the copy is consistent (Consistency says how each was taken).
          </p>
          <div class="backup-toolbar">
            <button type="button" class="primary" disabled={busy || (!!took && unfinished(took))} aria-busy={busy || (!!took && unfinished(took))} onClick={backUp}>
              Back up now
            </button>
            <p class="status-line small" role="status" aria-live="polite">
              {!taking ? "" : !took ? "Backup " + taking + " asked for…" : unfinished(took) ? "Taking backup " + taking + " (" + took.state + ")…" : took.state === "completed" ? "Backup " + taking + " completed." : "Backup " + taking + " failed: see why below."}
            </p>
          </div>
          <ErrorNote error={postError ?? error} />
          {items !== null && items.length === 0 ? (
            <div class="empty-state small">
              <p>No backups of this app yet. Back up now takes one; an app with volumes is also backed up every hour on its own.</p>
            </div>
          ) : (
            <BackupTable
              items={items}
              caption={"Backups of " + name + ", newest first"}
              restore={mayRestore ? (b) => ({ method: "POST", path: "/apps/" + seg(appID) + "/restore", body: { backup_id: b.id }, app: name }) : null}
              onChanged={reload}
            />
          )}
          {!mayRestore && items !== null && items.length > 0 && <p class="hint">Restoring needs app.deploy on this app, which you do not hold.</p>}
        </>
      )}
    </section>
  );
}
