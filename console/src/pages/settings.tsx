import { useEffect, useRef, useState } from "preact/hooks";
import { API, call, seg, type App } from "../api";
import { navigate } from "../router";
import { Confirm, ErrorNote, Field, Submit, useSubmit } from "../ui";
import type { AppPageProps } from "./app";
import { IdleSettings } from "./idle";
import "./settings.css";

// An app's settings, /apps/<app ID>/settings: its name and slug
// (PATCH /apps/{id}); its tile image (GET …/icon shows it, a generated one
// when none is set; PUT …/icon uploads a PNG, JPEG, WebP or GIF chosen with
// the file input or dropped on it, the API telling the format by the
// content and refusing anything else, SVG included, or anything too large;
// DELETE …/icon removes it); and deleting the app (DELETE /apps/{id} with
// backup=true — a final backup taken and the volumes kept — or force=true
// — the data discarded, refused with POLICY_BACKUP_REQUIRED under host
// policy —, chosen explicitly in a dialog that also asks for the slug; a
// refusal is shown in it), after which the console goes to /apps.

/** AppWithIcon is an app as the API answers it, with when its tile changed. */
type AppWithIcon = App & { icon_updated_at?: string | null };

export function Settings(props: AppPageProps) {
  const app = props.app as AppWithIcon | null;
  return (
    <div class="settings">
      <Naming appID={props.appID} app={app} onChanged={props.onChanged} />
      <TileImage appID={props.appID} app={app} onChanged={props.onChanged} />
      <IdleSettings appID={props.appID} verbs={props.verbs} />
      <Danger appID={props.appID} app={app} />
    </div>
  );
}

function Naming(props: { appID: string; app: AppWithIcon | null; onChanged: () => Promise<void> }) {
  const { app } = props;
  const [name, setName] = useState("");
  const [slug, setSlug] = useState("");
  const [saved, setSaved] = useState("");
  // The fields start from the app as read, and follow it until edited.
  const [touched, setTouched] = useState(false);
  useEffect(() => {
    if (app && !touched) {
      setName(app.name);
      setSlug(app.slug);
    }
  }, [app?.name, app?.slug, touched]);
  const form = useSubmit(async () => {
    if (!app) return;
    setSaved("");
    const body: Record<string, string> = {};
    if (name.trim() !== app.name) body.name = name.trim();
    if (slug.trim() !== app.slug) body.slug = slug.trim();
    if (Object.keys(body).length === 0) {
      setSaved("Nothing changed.");
      return;
    }
    const r = await call<{ app: App }>("PATCH", "/apps/" + seg(props.appID), body);
    setTouched(false);
    setName(r.app.name);
    setSlug(r.app.slug);
    setSaved("Saved." + (body.slug ? " The app’s address is now " + (r.app.url ?? "given at its next deploy") + "." : ""));
    await props.onChanged();
  });
  return (
    <section class="block panel" aria-labelledby="naming-h">
      <h2 id="naming-h">Name and address</h2>
      <form onSubmit={form.onSubmit} aria-describedby="naming-error" aria-busy={!app}>
        <div class="naming-fields">
          <Field label="Name" name="app_name" value={name} onInput={(v) => (setTouched(true), setName(v))} hint="Shown on tiles and pages." />
          <Field label="Slug" name="app_slug" value={slug} onInput={(v) => (setTouched(true), setSlug(v))} hint="Part of the app’s address: changing it changes the address, and links to the old one stop working." />
        </div>
        <ErrorNote error={form.error} id="naming-error" />
        <div class="inline-form">
          <Submit busy={form.busy || !app}>Save</Submit>
          <span class="muted" role="status" aria-live="polite">
            {saved}
          </span>
        </div>
      </form>
    </section>
  );
}

const accepted = "image/png,image/jpeg,image/webp,image/gif";

function TileImage(props: { appID: string; app: AppWithIcon | null; onChanged: () => Promise<void> }) {
  const { app } = props;
  const [version, setVersion] = useState<string>("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [over, setOver] = useState(false);
  const [status, setStatus] = useState("");
  const [asking, setAsking] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  const hasImage = !!app?.icon_updated_at;
  const v = version || app?.icon_updated_at || "";
  const src = API + "/apps/" + seg(props.appID) + "/icon" + (v ? "?v=" + encodeURIComponent(v) : "");

  const send = async (file: File | undefined) => {
    if (!file || busy) return;
    setBusy(true);
    setError(null);
    setStatus("Uploading " + file.name + "…");
    try {
      const r = await call<{ app: AppWithIcon }>("PUT", "/apps/" + seg(props.appID) + "/icon", file, file.type || "application/octet-stream");
      setVersion(r.app.icon_updated_at ?? String(Date.now()));
      setStatus("The tile shows " + file.name + " now.");
      await props.onChanged();
    } catch (e) {
      setError(e);
      setStatus("");
    } finally {
      setBusy(false);
      if (input.current) input.current.value = "";
    }
  };
  const remove = async () => {
    setAsking(false);
    setBusy(true);
    setError(null);
    try {
      await call("DELETE", "/apps/" + seg(props.appID) + "/icon");
      setVersion("generated-" + Date.now());
      setStatus("The image is removed; the tile shows a generated one.");
      await props.onChanged();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="block panel" aria-labelledby="tile-h">
      <h2 id="tile-h">Tile image</h2>
      <div class="tile-editor">
        <img class="tile-preview" src={src} alt={app ? "The tile image of " + app.name : "The tile image"} width={96} height={96} data-version={v} />
        <div
          class={"dropzone" + (over ? " over" : "")}
          onDragOver={(e) => {
            e.preventDefault();
            setOver(true);
          }}
          onDragLeave={() => setOver(false)}
          onDrop={(e) => {
            e.preventDefault();
            setOver(false);
            send(e.dataTransfer?.files?.[0]);
          }}
        >
          <label for="tile-file">Choose an image, or drop one here</label>
          <input ref={input} id="tile-file" name="tile_file" type="file" accept={accepted} disabled={busy} aria-describedby="tile-hint" onChange={(e) => send((e.currentTarget as HTMLInputElement).files?.[0])} />
          <p class="hint" id="tile-hint">
            PNG, JPEG, WebP or GIF, at most 256 KB; square looks best. SVG is not accepted.
          </p>
          {hasImage && (
            <button type="button" disabled={busy} onClick={() => setAsking(true)}>
              Remove image
            </button>
          )}
        </div>
      </div>
      <ErrorNote error={error} />
      <p class="status muted" role="status" aria-live="polite">
        {status}
      </p>
      {asking && (
        <Confirm title="Remove the tile image?" action="Remove image" danger onConfirm={remove} onCancel={() => setAsking(false)}>
          <p>The tile shows a generated image instead, for everyone who sees the app.</p>
        </Confirm>
      )}
    </section>
  );
}

type Decision = "" | "backup" | "force";

function Danger(props: { appID: string; app: AppWithIcon | null }) {
  const [open, setOpen] = useState(false);
  return (
    <section class="block panel danger-zone" aria-labelledby="danger-h">
      <h2 id="danger-h">Delete the app</h2>
      <p>Deleting stops the app, removes its address, its grants, secrets and revisions. You decide what happens to the data in its volumes.</p>
      <button type="button" class="danger" disabled={!props.app} onClick={() => setOpen(true)}>
        Delete this app…
      </button>
      {open && props.app && <DeleteDialog appID={props.appID} app={props.app} onCancel={() => setOpen(false)} />}
    </section>
  );
}

/** DeleteDialog asks for the backup decision and the slug, then deletes. */
function DeleteDialog(props: { appID: string; app: AppWithIcon; onCancel: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  const [decision, setDecision] = useState<Decision>("");
  const [typed, setTyped] = useState("");
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
    return () => d?.close();
  }, []);
  const ready = decision !== "" && typed.trim() === props.app.slug;
  const form = useSubmit(async () => {
    if (!ready) return;
    await call("DELETE", "/apps/" + seg(props.appID) + "?" + (decision === "backup" ? "backup=true" : "force=true"));
    navigate("/apps");
  });
  return (
    <dialog ref={ref} class="confirm delete-dialog" aria-labelledby="delete-title" onCancel={(e) => (e.preventDefault(), props.onCancel())}>
      <h2 id="delete-title">Delete {props.app.name}?</h2>
      <form onSubmit={form.onSubmit} aria-describedby="delete-error">
        <fieldset class="decision">
          <legend>What happens to its data</legend>
          <label>
            <input type="radio" name="delete_decision" value="backup" checked={decision === "backup"} onChange={() => setDecision("backup")} required /> Keep its data: a final backup is taken, and
            its volumes are kept for a new app of the same slug to take over (or to delete under Admin › Storage)
          </label>
          <label>
            <input type="radio" name="delete_decision" value="force" checked={decision === "force"} onChange={() => setDecision("force")} /> Discard its data for good, without a copy
          </label>
          <p class="hint">Host policy may require a final backup: discarding is then refused.</p>
        </fieldset>
        <div class="field">
          <label for="delete-slug">
            Type the app’s slug, <code>{props.app.slug}</code>, to confirm
          </label>
          <input id="delete-slug" name="delete_slug" autocomplete="off" spellcheck={false} required value={typed} onInput={(e) => setTyped((e.currentTarget as HTMLInputElement).value)} />
        </div>
        <p class="hint" role="status" aria-live="polite">
          {form.busy ? (decision === "backup" ? "Taking the final backup, then deleting…" : "Deleting…") : ""}
        </p>
        <ErrorNote error={form.error} id="delete-error" />
        <div class="confirm-actions">
          <button type="submit" class="danger" disabled={!ready || form.busy} aria-busy={form.busy}>
            Delete {props.app.name}
          </button>
          <button type="button" onClick={props.onCancel} autofocus>
            Cancel
          </button>
        </div>
      </form>
    </dialog>
  );
}
