import { useCallback, useEffect, useState } from "preact/hooks";
import { all, call, seg } from "../api";
import { Link } from "../router";
import { ErrorNote, Field, Notice } from "../ui";
import type { AppPageProps } from "./app";
import { bytes } from "../ui";
import { specsPath, workloadsOf, type SpecList, type SpecView } from "./specdoc";
import "./specs.css";

// The volumes, /apps/<app ID>/volumes: the app's storage as the pinned
// revision declares it (GET …/volumes: size, mounts), and declaring one
// (POST …/volumes), which writes a new revision from the latest that is
// neither pinned nor deployed.

interface Volume {
  name: string;
  size_bytes: number;
  mounts: { workload: string; path: string }[];
}

const units: { label: string; bytes: number }[] = [
  { label: "MiB", bytes: 1 << 20 },
  { label: "GiB", bytes: 1 << 30 },
  { label: "TiB", bytes: 1024 * (1 << 30) },
];

export function Volumes(props: AppPageProps) {
  const { appID } = props;
  const [items, setItems] = useState<Volume[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [workloads, setWorkloads] = useState<string[] | null>(null);
  const [latest, setLatest] = useState<number | null>(null);
  const [name, setName] = useState("");
  const [size, setSize] = useState("1");
  const [unit, setUnit] = useState("GiB");
  const [workload, setWorkload] = useState("");
  const [path, setPath] = useState("");
  const [busy, setBusy] = useState(false);
  const [formError, setFormError] = useState<unknown>(null);
  const [made, setMade] = useState<{ name: string; rev: number } | null>(null);

  const load = useCallback(async () => {
    try {
      setItems(await all<Volume>("/apps/" + seg(appID) + "/volumes"));
    } catch (e) {
      setError(e);
    }
  }, [appID]);
  // The workloads a volume can be mounted in: the latest revision's, which
  // the new revision starts from.
  const loadWorkloads = useCallback(async () => {
    try {
      const l = await call<SpecList>("GET", specsPath(appID) + "?limit=1");
      const n = l.items[0]?.revision ?? null;
      setLatest(n);
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
    load();
    loadWorkloads();
  }, [load, loadWorkloads]);

  const declare = async (e: Event) => {
    e.preventDefault();
    if (busy) return;
    setBusy(true);
    setFormError(null);
    setMade(null);
    try {
      const n = Number(size);
      const per = units.find((u) => u.label === unit)?.bytes ?? 1 << 30;
      const body = { name: name.trim(), size_bytes: Math.round(n * per), workload: workload || undefined, path: path.trim() };
      const c = await call<{ volume: Volume; spec: { revision: number } }>("POST", "/apps/" + seg(appID) + "/volumes", body);
      setMade({ name: c.volume.name, rev: c.spec.revision });
      setName("");
      setPath("");
      await loadWorkloads();
    } catch (err) {
      setFormError(err);
    } finally {
      setBusy(false);
    }
  };

  const spec = "/apps/" + appID + "/spec";
  return (
    <div class="volumes">
      <section aria-labelledby="volumes-h" class="block">
        <h2 id="volumes-h">Volumes</h2>
        <p class="muted small">Paths kept between deploys, as the pinned revision declares them; data written anywhere else is discarded at the next deploy.</p>
        <ErrorNote error={error} />
        {items === null ? (
          <p class="placeholder" aria-busy="true">
            Reading volumes…
          </p>
        ) : items.length === 0 ? (
          <div class="empty-state small">
            <p>No volumes: everything the app writes is discarded at its next deploy. Declare one below for data it must keep.</p>
          </div>
        ) : (
          <table class="list" data-table="volumes">
            <caption class="visually-hidden">Volumes</caption>
            <thead>
              <tr>
                <th scope="col">Volume</th>
                <th scope="col">Size</th>
                <th scope="col">Mounted</th>
              </tr>
            </thead>
            <tbody>
              {items.map((v) => (
                <tr key={v.name} data-volume={v.name}>
                  <th scope="row">{v.name}</th>
                  <td>{bytes(v.size_bytes)}</td>
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
              ))}
            </tbody>
          </table>
        )}
      </section>
      <section aria-labelledby="declare-h" class="block">
        <h2 id="declare-h">Declare a volume</h2>
        <p class="muted small">
          This writes a new spec revision{latest ? " from the latest (" + latest + ")" : ""} with the volume and its mount. The new revision is neither pinned nor deployed: pin it,
          then deploy, for the app to have the volume.
        </p>
        <form class="panel volume-form" onSubmit={declare}>
          <Field label="Name" name="volume_name" value={name} onInput={setName} hint="A lower-case letter, then lower-case letters, digits and hyphens: data, uploads." />
          <div class="row">
            <div class="field size">
              <label for="volume-size">Size</label>
              <input id="volume-size" name="volume_size" type="number" min="1" step="any" required value={size} onInput={(e) => setSize((e.currentTarget as HTMLInputElement).value)} aria-describedby="volume-size-hint" />
            </div>
            <div class="field unit">
              <label for="volume-unit">Unit</label>
              <select id="volume-unit" name="volume_unit" value={unit} onChange={(e) => setUnit((e.currentTarget as HTMLSelectElement).value)}>
                {units.map((u) => (
                  <option key={u.label} value={u.label}>
                    {u.label}
                  </option>
                ))}
              </select>
            </div>
          </div>
          <p class="hint" id="volume-size-hint">
            From 1 MiB to 10 TiB.
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
          <ErrorNote error={formError} />
          <div class="actions">
            <button type="submit" class="primary" disabled={busy} aria-busy={busy}>
              Declare the volume
            </button>
          </div>
        </form>
        {made && (
          <Notice>
            Revision {made.rev} declares <strong>{made.name}</strong>; it is neither pinned nor deployed. <Link href={spec + "/" + made.rev}>Pin revision {made.rev}</Link>,{" "}
            <Link href={"/apps/" + appID + "/plan?revision=" + made.rev}>see its plan</Link> or <Link href={spec + "/" + (made.rev - 1 || made.rev) + "/diff/" + made.rev}>what changes</Link>.
          </Notice>
        )}
      </section>
    </div>
  );
}
