import { useEffect, useState } from "preact/hooks";
import { ApiError, call, seg, type Me } from "../api";
import { Link, navigate } from "../router";
import { ErrorNote } from "../ui";
import { uploadArchive, type AppSource } from "./onboard";
import { ArchivePicker, UploadProgress, type Progress } from "./upload";
import "./newapp.css";

// The new-app page, /new: create an app (POST /api/v1/apps) from a git
// repository (cloned and detected behind the answer) or from a source
// archive uploaded with its progress shown (POST …/source), then on to the
// app's detection page. A refusal about one field (details.field) is shown
// at that field; any other with its message and remedy. An app created
// whose upload is refused stays: choosing another archive uploads to it.

type Kind = "archive" | "repository";

interface Created {
  id: string;
  name: string;
  slug: string;
  source: AppSource | null;
}

// The fields a refusal may name, and the input that shows it.
const fieldInputs: Record<string, string> = {
  name: "name",
  slug: "slug",
  "source.repository": "repository",
  "source.ref": "ref",
  "source.subdir": "subdir",
};

export function NewApp() {
  const [me, setMe] = useState<Me | null>(null);
  const [kind, setKind] = useState<Kind>("archive");
  const [name, setName] = useState("");
  const [slug, setSlug] = useState("");
  const [repository, setRepository] = useState("");
  const [ref, setRef] = useState("");
  const [subdir, setSubdir] = useState("");
  const [file, setFile] = useState<File | null>(null);
  const [created, setCreated] = useState<Created | null>(null);
  const [fieldError, setFieldError] = useState<{ field: string; error: ApiError } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [progress, setProgress] = useState<Progress>(null);

  useEffect(() => {
    call<Me>("GET", "/me").then(setMe, () => setMe(null));
  }, []);
  const mayCreate = !me || me.verbs.includes("app.create");

  const submit = async (e: Event) => {
    e.preventDefault();
    if (busy) return;
    setError(null);
    setFieldError(null);
    if (kind === "archive" && !file) {
      setError(new ApiError(0, "NO_ARCHIVE", "Choose the app’s source archive first.", "Press the drop zone to choose a file, or drop one on it."));
      return;
    }
    setBusy(true);
    try {
      let app = created;
      if (!app) {
        const body: Record<string, unknown> = { name: name.trim() };
        if (slug.trim()) body.slug = slug.trim();
        if (kind === "repository") {
          const src: Record<string, string> = { repository: repository.trim() };
          if (ref.trim()) src.ref = ref.trim();
          if (subdir.trim()) src.subdir = subdir.trim();
          body.source = src;
        }
        app = (await call<{ app: Created }>("POST", "/apps", body)).app;
        setCreated(app);
      }
      if (kind === "repository") {
        navigate("/apps/" + seg(app.id) + "/detection?from=repository");
        return;
      }
      setProgress({ sent: 0, total: file!.size });
      const up = await uploadArchive(app.id, file!, (sent, total) => setProgress({ sent, total: total || file!.size }));
      navigate("/apps/" + seg(app.id) + "/detection?checkout=" + encodeURIComponent(up.checkout_id));
    } catch (err) {
      setProgress(null);
      if (err instanceof ApiError && err.field && fieldInputs[err.field]) {
        setFieldError({ field: fieldInputs[err.field], error: err });
        document.getElementById("f-" + fieldInputs[err.field])?.focus();
      } else {
        setError(err);
      }
    } finally {
      setBusy(false);
    }
  };

  const at = (input: string) => (fieldError?.field === input ? fieldError.error : null);
  if (!mayCreate) {
    return (
      <div class="new-app narrow">
        <h1>New app</h1>
        <ErrorNote error={new ApiError(403, "PERM_VERB_REQUIRED", "Your account may not create apps: it lacks the verb app.create.", "Ask an administrator for a role that holds it.")} />
      </div>
    );
  }
  return (
    <div class="new-app narrow">
      <h1>New app</h1>
      <p class="lead">
        Give the app a name and its source. svc detects how to run it and proposes a configuration for you to check and accept on the next page; nothing runs
        until you deploy.
      </p>
      <form onSubmit={submit} aria-describedby="new-error" noValidate>
        <FieldAt label="Name" name="name" value={name} onInput={setName} error={at("name")} required disabled={!!created} hint="What people see, up to 100 characters." />
        <FieldAt
          label="Slug (optional)"
          name="slug"
          value={slug}
          onInput={setSlug}
          error={at("slug")}
          disabled={!!created}
          hint="The app’s short name in its address and in the CLI: lowercase letters, digits and inner dashes, up to 40. Made from the name when empty."
        />
        <fieldset class="source-kind">
          <legend>Source</legend>
          <label class="choice">
            <input type="radio" name="kind" value="archive" checked={kind === "archive"} onChange={() => setKind("archive")} disabled={!!created} /> Upload an archive
          </label>
          <label class="choice">
            <input type="radio" name="kind" value="repository" checked={kind === "repository"} onChange={() => setKind("repository")} disabled={!!created} /> A git
            repository
          </label>
        </fieldset>
        {kind === "archive" ? (
          <>
            <ArchivePicker file={file} onFile={setFile} disabled={busy} />
            <UploadProgress progress={progress} label="Upload of the archive" />
          </>
        ) : (
          <div class="repo-fields">
            <FieldAt
              label="Repository URL"
              name="repository"
              type="url"
              value={repository}
              onInput={setRepository}
              error={at("repository")}
              required
              hint="https:// (or ssh://, git@host:path). Host policy may limit which hosts svc clones from."
            />
            <div class="two">
              <FieldAt label="Ref (optional)" name="ref" value={ref} onInput={setRef} error={at("ref")} hint="A branch, tag or commit; the default branch when empty." />
              <FieldAt label="Subdirectory (optional)" name="subdir" value={subdir} onInput={setSubdir} error={at("subdir")} hint="The app’s directory in the repository." />
            </div>
          </div>
        )}
        <ErrorNote error={error} id="new-error" />
        {created && (
          <p class="small created-note">
            The app <Link href={"/apps/" + seg(created.id)}>{created.name}</Link> (<code>{created.slug}</code>) exists; its source was not taken. Choose another
            archive and upload again.
          </p>
        )}
        <div class="actions">
          <button type="submit" class="primary" disabled={busy} aria-busy={busy}>
            {busy ? (kind === "archive" && created ? "Uploading…" : "Creating…") : created ? "Upload to " + created.name : kind === "archive" ? "Create and upload" : "Create from the repository"}
          </button>
          <Link href="/apps" class="button">
            Cancel
          </Link>
        </div>
      </form>
      <p class="small muted cli-hint">
        From a terminal instead: <code>svc launch ./my-app</code> creates, uploads, accepts and deploys in one go.
      </p>
    </div>
  );
}

/** FieldAt is a labelled input that shows the API's refusal about it. */
function FieldAt(props: {
  label: string;
  name: string;
  type?: string;
  value: string;
  onInput: (v: string) => void;
  error: ApiError | null;
  hint?: string;
  required?: boolean;
  disabled?: boolean;
}) {
  const id = "f-" + props.name;
  const described = [props.hint ? id + "-hint" : "", id + "-error"].filter(Boolean).join(" ");
  return (
    <div class={"field" + (props.error ? " invalid" : "")}>
      <label for={id}>{props.label}</label>
      <input
        id={id}
        name={props.name}
        type={props.type ?? "text"}
        value={props.value}
        required={props.required}
        disabled={props.disabled}
        autocomplete="off"
        aria-invalid={props.error ? "true" : undefined}
        aria-describedby={described}
        onInput={(e) => props.onInput((e.currentTarget as HTMLInputElement).value)}
      />
      {props.hint && (
        <p class="hint" id={id + "-hint"}>
          {props.hint}
        </p>
      )}
      <p class="field-error" id={id + "-error"} aria-live="polite" data-code={props.error?.code ?? ""}>
        {props.error ? sentence(props.error.message) + (props.error.remedy ? " " + sentence(props.error.remedy) : "") : ""}
      </p>
    </div>
  );
}

function sentence(s: string): string {
  const t = s.charAt(0).toUpperCase() + s.slice(1);
  return /[.!?]$/.test(t) ? t : t + ".";
}
