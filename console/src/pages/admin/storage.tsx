import { useCallback, useEffect, useState } from "preact/hooks";
import { all, call, seg, type App } from "../../api";
import { Link } from "../../router";
import { Confirm, ErrorNote, ListTable, bytes, usePoll, when } from "../../ui";
import type { AdminPageProps } from "../admin";
import { BackupTable, UsedBar, useBackups, type Backup, type VolumeView } from "../backups";
import { may } from "./host";

// Storage, /admin/storage: every volume of the installation (GET
// /api/v1/volumes, install.view), those of live apps (linked) and those
// kept after their app was deleted (app_gone_at), with size and use;
// deleting a kept one (DELETE /api/v1/volumes/{id}, install.backup.manage)
// behind a confirmation, as its data goes for good. Then every backup (GET
// /api/v1/backups with its kind and app filters, install.backup.manage),
// with Verify and Restore (POST /backups/{id}/restore). An app's Back up
// now is on its Volumes tab.

const kindFilters: { value: string; label: string }[] = [
  { value: "", label: "Every kind" },
  { value: "rolling", label: "Rolling" },
  { value: "on_delete", label: "Final, at deletion" },
  { value: "dr_bundle", label: "Installation bundle" },
];

export function Storage(props: AdminPageProps) {
  const manages = may(props.me, "install.backup.manage");
  const [vols, setVols] = useState<VolumeView[] | null>(null);
  const [volError, setVolError] = useState<unknown>(null);
  // The live apps by ID (null until read).
  const [known, setKnown] = useState<Record<string, App> | null>(null);
  const apps = known ?? {};
  const [kind, setKind] = useState("");
  const [appFilter, setAppFilter] = useState("");
  // Deleted apps' slugs, from their backups (a backup names its app's slug).
  const [slugs, setSlugs] = useState<Record<string, string>>({});
  const [asking, setAsking] = useState<VolumeView | null>(null);
  const [deleted, setDeleted] = useState("");
  const [delError, setDelError] = useState<unknown>(null);
  const [bundling, setBundling] = useState(false);
  const [bundled, setBundled] = useState("");
  const [bundleError, setBundleError] = useState<unknown>(null);

  const loadVolumes = useCallback(async () => {
    try {
      setVols(await all<VolumeView>("/volumes"));
      setVolError(null);
    } catch (e) {
      setVolError(e);
    }
  }, []);
  usePoll(loadVolumes, 10000, [loadVolumes]);
  useEffect(() => {
    all<App>("/apps").then(
      (as) => setKnown(Object.fromEntries(as.map((a) => [a.id, a]))),
      () => setKnown({}),
    );
  }, []);

  const q = new URLSearchParams();
  if (kind) q.set("kind", kind);
  if (appFilter) q.set("app_id", appFilter);
  const path = "/backups" + (q.toString() ? "?" + q.toString() : "");
  const { items, error, reload } = useBackups(manages ? path : null);
  useEffect(() => {
    if (!items) return;
    const more: Record<string, string> = {};
    for (const b of items) if (b.app_id && b.app_slug && slugs[b.app_id] !== b.app_slug) more[b.app_id] = b.app_slug;
    if (Object.keys(more).length > 0) setSlugs((s) => ({ ...s, ...more }));
  }, [items]);
  // The slugs of deleted apps whose volumes are kept, though the backups
  // shown are filtered.
  useEffect(() => {
    if (!manages) return;
    all<Backup>("/backups?kind=on_delete").then(
      (bs) => setSlugs((s) => ({ ...s, ...Object.fromEntries(bs.filter((b) => b.app_id && b.app_slug).map((b) => [b.app_id!, b.app_slug!])) })),
      () => undefined,
    );
  }, [manages]);

  const slugOf = (appID: string, given?: string) => given ?? slugs[appID] ?? null;
  const appCell = (appID: string | null, given?: string, gone?: boolean) => {
    if (!appID) return <span class="muted">the installation</span>;
    const a = apps[appID];
    if (!gone) return <Link href={"/apps/" + appID + "/volumes"}>{a ? a.name : appID}</Link>;
    const s = slugOf(appID, given);
    return (
      <span class="gone-app">
        deleted app {s ? <code>{s}</code> : <code>{appID}</code>}
      </span>
    );
  };

  const remove = async () => {
    const v = asking;
    setAsking(null);
    if (!v?.id) return;
    setDelError(null);
    setDeleted("");
    try {
      await call("DELETE", "/volumes/" + seg(v.id));
      setDeleted("Volume " + v.name + " (" + v.id + ") is deleted: its data is removed for good.");
      await loadVolumes();
    } catch (e) {
      setDelError(e);
    }
  };

  // An installation bundle: the store, the keyring, sources, builds and
  // every volume, for svc restore --bundle on a new machine.
  const takeBundle = async () => {
    setBundling(true);
    setBundleError(null);
    setBundled("");
    try {
      const a = await call<{ backup: Backup }>("POST", "/backups", {});
      setBundled("Installation bundle " + a.backup.id + " is being taken; it is listed below.");
      reload();
    } catch (e) {
      setBundleError(e);
    } finally {
      setBundling(false);
    }
  };

  // The app filter offers the live apps and the deleted ones seen.
  const appChoices: { id: string; label: string }[] = [
    ...Object.values(apps)
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((a) => ({ id: a.id, label: a.name })),
    ...Object.entries(slugs)
      .filter(([id]) => !apps[id])
      .map(([id, s]) => ({ id, label: "deleted app " + s })),
  ];
  if (appFilter && !appChoices.some((c) => c.id === appFilter)) appChoices.push({ id: appFilter, label: appFilter });

  return (
    <div class="host storage-admin">
      <h1>Storage</h1>
      <p class="lead">
        The installation’s volumes and backups. A volume outlives its app when the app is deleted with a backup: it is kept until a new app of the same slug takes it over (on that app’s
        Volumes tab) or it is deleted here.
      </p>
      <section class="block" aria-labelledby="storage-volumes-h">
        <h2 id="storage-volumes-h">Volumes</h2>
        <ErrorNote error={volError ?? delError} />
        {vols !== null && vols.length === 0 ? (
          <div class="empty-state small">
            <p>No volumes yet. An app gets one when it declares one (on its Volumes tab, or in its spec) and is deployed; volumes of deleted apps kept with a backup are listed here too.</p>
          </div>
        ) : (
          <ListTable name="storage-volumes" caption="Every volume, by ID" columns={["Volume", "App", "Size", "Used", "Kept since", ""]} fixed>
            {vols?.map((v) => (
              <tr key={v.id ?? v.app_id + "/" + v.name} data-volume={v.id ?? ""} data-gone={v.app_gone_at ? "true" : "false"}>
                <th scope="row">
                  {v.name}
                  <code class="backup-id">{v.id}</code>
                </th>
                <td>{appCell(v.app_id, v.app_slug, !!v.app_gone_at)}</td>
                <td>{bytes(v.size_bytes)}</td>
                <td>
                  <UsedBar name={v.name} used={v.used_bytes} size={v.size_bytes} />
                </td>
                <td>{v.app_gone_at ? when(v.app_gone_at) : <span class="muted">in use</span>}</td>
                <td class="row-actions">
                  {v.app_gone_at && manages ? (
                    <button type="button" class="small danger" onClick={() => setAsking(v)}>
                      Delete
                    </button>
                  ) : v.app_gone_at ? (
                    <span class="muted small">kept</span>
                  ) : (
                    <span class="muted small">goes with its app</span>
                  )}
                </td>
              </tr>
            ))}
          </ListTable>
        )}
        <p class="hint deleted-line" role="status" aria-live="polite">
          {deleted}
        </p>
        {asking && (
          <Confirm title={"Delete volume " + asking.name + "?"} action="Delete for good" danger onConfirm={remove} onCancel={() => setAsking(null)}>
            <p>
              The data of <code>{asking.id}</code>
              {asking.used_bytes !== null ? " (" + bytes(asking.used_bytes) + ")" : ""}, kept from the deleted app {slugOf(asking.app_id, asking.app_slug) ?? asking.app_id}, is removed for good: no app can
              take it over afterwards.
            </p>
            <p>Backups of it stay in the backup storage (listed below) until they are deleted themselves.</p>
          </Confirm>
        )}
      </section>
      <section class="block" aria-labelledby="storage-backups-h">
        <h2 id="storage-backups-h">Backups</h2>
        {!manages ? (
          <div class="empty-state small backups-who">
            <p>
              Backups are listed, verified and restored by people holding <code>install.backup.manage</code>, which you do not hold. Ask an administrator of the installation.
            </p>
          </div>
        ) : (
          <>
            <p class="muted small">
              Newest first. Back up an app now on its Volumes tab. An installation bundle holds everything (the store, the keyring, sources, builds and every volume) and is restored
              into a new installation with <code>svc restore --bundle</code> (see docs/disaster-recovery.md).
            </p>
            <p class="inline-form bundle-take">
              <button type="button" class="small" disabled={bundling} aria-busy={bundling} onClick={takeBundle}>
                Take an installation bundle
              </button>
              <span class="hint bundle-line" role="status" aria-live="polite">
                {bundled}
              </span>
            </p>
            <ErrorNote error={bundleError} />
            <form class="inline-form backup-filters" onSubmit={(e) => e.preventDefault()}>
              <label for="backup-kind">Kind</label>
              <select id="backup-kind" name="backup_kind" value={kind} onChange={(e) => setKind((e.currentTarget as HTMLSelectElement).value)}>
                {kindFilters.map((k) => (
                  <option key={k.value} value={k.value}>
                    {k.label}
                  </option>
                ))}
              </select>
              <label for="backup-app">App</label>
              <select id="backup-app" name="backup_app" value={appFilter} onChange={(e) => setAppFilter((e.currentTarget as HTMLSelectElement).value)}>
                <option value="">Every app</option>
                {appChoices.map((c) => (
                  <option key={c.id} value={c.id}>
                    {c.label}
                  </option>
                ))}
              </select>
            </form>
            <ErrorNote error={error} />
            {items !== null && items.length === 0 ? (
              <div class="empty-state small">
                <p>
                  {kind || appFilter
                    ? "No backups match these filters."
                    : "No backups yet. Apps with volumes are backed up every hour; back one up now on its Volumes tab, and a final backup is taken when an app is deleted with one."}
                </p>
              </div>
            ) : (
              <BackupTable
                items={items}
                caption="Backups, newest first"
                app={(b) => (known === null ? <span class="muted">{b.app_slug ?? b.app_id}</span> : appCell(b.app_id, b.app_slug, !apps[b.app_id ?? ""]))}
                restore={(b) => ({ method: "POST", path: "/backups/" + seg(b.id) + "/restore", app: b.app_id && apps[b.app_id] ? apps[b.app_id].name : "deleted app " + (b.app_slug ?? b.app_id) })}
                onChanged={reload}
              />
            )}
          </>
        )}
      </section>
    </div>
  );
}
