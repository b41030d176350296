import { useEffect, useRef, useState } from "preact/hooks";
import { call, seg } from "../api";
import { Confirm, ErrorNote, ListTable, Submit, useSubmit, when } from "../ui";
import type { AppPageProps } from "./app";
import { Listed, useList } from "./lists";
import "./secrets.css";

// The secrets, /apps/<app ID>/secrets: names, origins and versions
// (GET …/secrets, every page), set or rotate one (PUT …/secrets/{key}: the
// value typed in a password field, sent in the body, never shown again),
// delete one (confirmed), and read a value where permitted
// (GET …/secrets/{key}/value) only after a confirmation saying that the
// read is audited. A value read is shown masked, with reveal and copy, and
// is dropped from the page's state when the person hides it or leaves.

/** SecretView is a secret as GET …/secrets lists it: never its value. */
export interface SecretView {
  key: string;
  origin: string;
  version: number;
  updated_at: string;
}

/** Read is a value read after the audit warning. */
interface Read {
  key: string;
  value: string;
}

const keyPattern = "[A-Za-z_][A-Za-z0-9_]*";

export function Secrets(props: AppPageProps) {
  const { appID } = props;
  const base = "/apps/" + seg(appID) + "/secrets";
  const { items, setItems, error, setError, load } = useList<SecretView>(base);
  const [key, setKey] = useState("");
  const [value, setValue] = useState("");
  const [saved, setSaved] = useState("");
  const [deleting, setDeleting] = useState<string | null>(null);
  const [reading, setReading] = useState<string | null>(null);
  const [read, setRead] = useState<Read | null>(null);
  const [readError, setReadError] = useState<unknown>(null);
  const valueRef = useRef<HTMLInputElement>(null);

  useEffect(() => {
    setItems(null);
    load();
  }, [load]);
  // A value read never outlives the page: leaving it (another tab, another
  // app, closing the browser's page) forgets it.
  useEffect(() => {
    const forget = () => setRead(null);
    window.addEventListener("pagehide", forget);
    return () => {
      window.removeEventListener("pagehide", forget);
      setRead(null);
    };
  }, [appID]);

  const existing = items?.find((s) => s.key === key.trim());
  const form = useSubmit(async () => {
    const k = key.trim();
    setSaved("");
    let r: { secret: SecretView };
    try {
      r = await call<{ secret: SecretView }>("PUT", base + "/" + seg(k), { value });
    } finally {
      // The value is sent once and never kept or shown again, refused or not.
      setValue("");
    }
    setSaved(existing ? k + " rotated to version " + r.secret.version + "." : k + " set (version " + r.secret.version + ").");
    setKey("");
    if (read?.key === k) setRead(null);
    await load();
  });

  const rotate = (k: string) => {
    setKey(k);
    setSaved("");
    valueRef.current?.focus();
  };

  const remove = async (k: string) => {
    setDeleting(null);
    setError(null);
    try {
      await call("DELETE", base + "/" + seg(k));
      if (read?.key === k) setRead(null);
      await load();
    } catch (e) {
      setError(e);
    }
  };

  const readValue = async (k: string) => {
    setReading(null);
    setReadError(null);
    setRead(null);
    try {
      const r = await call<{ key: string; value: string }>("GET", base + "/" + seg(k) + "/value");
      setRead({ key: r.key, value: r.value });
    } catch (e) {
      setReadError(e);
    }
  };

  return (
    <div class="secrets">
      <section aria-labelledby="secret-set-h" class="block panel">
        <h2 id="secret-set-h">Set or rotate a secret</h2>
        <form class="secret-form" onSubmit={form.onSubmit} aria-describedby="secret-form-error">
          <div class="field">
            <label for="secret-key">Name</label>
            <input id="secret-key" name="secret_key" required maxLength={128} pattern={keyPattern} autocomplete="off" spellcheck={false} value={key} onInput={(e) => setKey((e.currentTarget as HTMLInputElement).value)} aria-describedby="secret-key-hint" />
            <p class="hint" id="secret-key-hint">
              An environment variable name, such as DATABASE_PASSWORD.
            </p>
          </div>
          <div class="field">
            <label for="secret-value">Value</label>
            <input ref={valueRef} id="secret-value" name="secret_value" type="password" autocomplete="new-password" required={false} value={value} onInput={(e) => setValue((e.currentTarget as HTMLInputElement).value)} aria-describedby="secret-value-hint" />
            <p class="hint" id="secret-value-hint">
              Sent once and stored encrypted; this page never shows it back. The app receives it at its next deploy.
            </p>
          </div>
          <div class="secret-submit">
            <Submit busy={form.busy}>{existing ? "Rotate " + existing.key : "Set secret"}</Submit>
          </div>
        </form>
        <ErrorNote error={form.error} id="secret-form-error" />
        <p class="status" role="status" aria-live="polite">
          {saved}
        </p>
      </section>

      <ErrorNote error={error} />
      {read && <Revealed read={read} onForget={() => setRead(null)} />}
      <ErrorNote error={readError} />

      <section aria-labelledby="secrets-h" class="block">
        <h2 id="secrets-h">Secrets</h2>
        <Listed items={items} reading="Reading secrets…" empty="No secrets yet. Set one above; the app receives it as an environment variable at its next deploy.">
          {(items) => (
            <ListTable name="secrets" caption="Secrets by name (never their values)" columns={["Name", "Kept by", "Version", "Changed", ""]}>
              {items.map((s) => (
                <tr key={s.key} data-secret={s.key}>
                  <th scope="row">
                    <code>{s.key}</code>
                  </th>
                  <td>{s.origin}</td>
                  <td>{s.version}</td>
                  <td>{when(s.updated_at)}</td>
                  <td class="row-actions">
                    <button type="button" class="small" onClick={() => rotate(s.key)} aria-label={"Rotate " + s.key}>
                      Rotate
                    </button>
                    <button type="button" class="small" onClick={() => setReading(s.key)} aria-label={"Read value of " + s.key}>
                      Read value
                    </button>
                    <button type="button" class="small" onClick={() => setDeleting(s.key)} aria-label={"Delete " + s.key}>
                      Delete
                    </button>
                  </td>
                </tr>
              ))}
            </ListTable>
          )}
        </Listed>
      </section>

      {reading && (
        <Confirm title={"Read the value of " + reading + "?"} action="Read and record it" onConfirm={() => readValue(reading)} onCancel={() => setReading(null)}>
          <p>
            <strong>This read is audited.</strong> Every read of a secret’s value is recorded in the audit log (<code>secret.read</code>) with your name and
            the time, and administrators can see it.
          </p>
          <p>The value is shown masked on this page until you reveal it, and is forgotten when you leave the page.</p>
        </Confirm>
      )}
      {deleting && (
        <Confirm title={"Delete " + deleting + "?"} action={"Delete " + deleting} danger onConfirm={() => remove(deleting)} onCancel={() => setDeleting(null)}>
          <p>The secret is removed from where it is kept. The running app keeps its value until its next deploy, which no longer receives it.</p>
        </Confirm>
      )}
    </div>
  );
}

/** Revealed shows a value read: masked until revealed, with copy. */
function Revealed(props: { read: Read; onForget: () => void }) {
  const { read } = props;
  const [shown, setShown] = useState(false);
  const [copied, setCopied] = useState("");
  useEffect(() => {
    setShown(false);
    setCopied("");
  }, [read]);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(read.value);
      setCopied("Copied to the clipboard.");
    } catch {
      setCopied("This browser refused the clipboard: reveal the value and copy it by hand.");
    }
  };
  return (
    <section class="panel secret-read" aria-labelledby="secret-read-h" data-read={read.key}>
      <h2 id="secret-read-h">
        Value of <code>{read.key}</code>
      </h2>
      <p class="hint">This read was recorded in the audit log.</p>
      <div class="secret-value-row">
        <output class="secret-value" aria-label={"Value of " + read.key} data-masked={shown ? "false" : "true"}>
          {shown ? read.value : "•".repeat(Math.min(24, Math.max(8, read.value.length)))}
        </output>
        <button type="button" class="small" aria-pressed={shown} onClick={() => setShown(!shown)}>
          {shown ? "Hide" : "Reveal"}
        </button>
        <button type="button" class="small" onClick={copy}>
          Copy
        </button>
        <button type="button" class="small" onClick={props.onForget}>
          Forget
        </button>
      </div>
      <p class="status small" role="status" aria-live="polite">
        {copied}
      </p>
    </section>
  );
}
