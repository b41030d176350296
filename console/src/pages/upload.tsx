import { useRef, useState } from "preact/hooks";
import { bytes } from "../ui";
import { archiveType } from "./onboard";
import "./upload.css";

// The archive picker of the onboarding pages: a drop zone that is also a
// button (Enter or Space opens the file chooser; a file dropped on it is
// taken), over a file input of its own, and the upload's progress.

/** ArchivePicker chooses a source archive (.tar.gz, .tgz, .tar, .zip). */
export function ArchivePicker(props: { file: File | null; onFile: (f: File | null) => void; disabled?: boolean }) {
  const input = useRef<HTMLInputElement>(null);
  const [over, setOver] = useState(false);
  const [wrong, setWrong] = useState("");
  const take = (f: File | null | undefined) => {
    if (!f) return;
    if (!archiveType(f.name)) {
      setWrong("“" + f.name + "” is not an archive svc takes: choose a .tar.gz, .tgz, .tar or .zip file.");
      props.onFile(null);
      return;
    }
    setWrong("");
    props.onFile(f);
  };
  const f = props.file;
  return (
    <div class="archive-picker">
      <label for="f-archive" class="visually-hidden">
        Source archive
      </label>
      <input
        ref={input}
        id="f-archive"
        name="archive"
        type="file"
        class="visually-hidden"
        tabIndex={-1}
        accept=".tar.gz,.tgz,.tar,.zip,application/gzip,application/x-tar,application/zip"
        disabled={props.disabled}
        onChange={(e) => {
          const el = e.currentTarget as HTMLInputElement;
          take(el.files?.[0]);
          el.value = "";
        }}
      />
      <button
        type="button"
        class={"dropzone" + (over ? " over" : "") + (f ? " chosen" : "")}
        disabled={props.disabled}
        aria-describedby="archive-hint archive-chosen"
        onClick={() => input.current?.click()}
        onDragEnter={(e) => {
          e.preventDefault();
          setOver(true);
        }}
        onDragOver={(e) => {
          e.preventDefault();
          if (e.dataTransfer) e.dataTransfer.dropEffect = "copy";
        }}
        onDragLeave={() => setOver(false)}
        onDrop={(e) => {
          e.preventDefault();
          setOver(false);
          take(e.dataTransfer?.files?.[0]);
        }}
      >
        <span class="dz-title">{f ? "Choose another archive" : "Choose a source archive"}</span>
        <span class="dz-sub">or drop it here</span>
      </button>
      <p class="hint" id="archive-hint">
        A .tar.gz, .tgz, .tar or .zip of the app’s directory. Make one with <code>tar czf app.tar.gz -C my-app .</code>
      </p>
      <p class="chosen-file" id="archive-chosen" aria-live="polite" data-file={f ? f.name : ""}>
        {f ? (
          <>
            Chosen: <strong>{f.name}</strong> ({bytes(f.size)})
          </>
        ) : wrong ? (
          <span class="wrong">{wrong}</span>
        ) : (
          "No archive chosen yet."
        )}
      </p>
    </div>
  );
}

/** Progress is an upload's progress: sent of total bytes, or null. */
export type Progress = { sent: number; total: number } | null;

/** UploadProgress shows how far an upload is, keeping its place. */
export function UploadProgress(props: { progress: Progress; label: string }) {
  const p = props.progress;
  const pct = p && p.total > 0 ? Math.min(100, Math.round((p.sent / p.total) * 100)) : 0;
  const done = p !== null && p.total > 0 && p.sent >= p.total;
  return (
    <div class="upload-progress" data-percent={p ? pct : ""}>
      {p && (
        <>
          <progress max={100} value={pct} aria-label={props.label} />
          <span class="small" role="status">
            {done ? "Uploaded " + bytes(p.total) + "; the server checks and unpacks it…" : "Uploading: " + bytes(p.sent) + (p.total ? " of " + bytes(p.total) + " (" + pct + "%)" : "")}
          </span>
        </>
      )}
    </div>
  );
}
