import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { call, type Problem } from "../../api";
import { Link } from "../../router";
import { Confirm, ErrorNote, Notice, ProblemNote } from "../../ui";
import type { AdminPageProps } from "../admin";
import { may, origins, type ConfigAnswer, type FixedEntry } from "./host";
import "./host.css";

// Host policy, /admin/policy: every setting (GET /api/v1/policy) with its
// value; a setting fixed at startup is read-only, saying where it was fixed
// (GET /api/v1/config's policy_fixed) and how to change it. The others are
// edited in place; each change is previewed (POST /api/v1/policy/preview:
// the apps the edited policy would block that the policy in force does
// not, with the reasons) before Save (PUT /api/v1/policy), which asks for
// confirmation when it blocks apps.

type Value = string[] | string | boolean | number;
type PolicyDoc = Record<string, Value>;

interface PolicyAnswer {
  policy: PolicyDoc;
  fixed: string[];
}

interface Blocked {
  app_id: string;
  name: string;
  reasons: Problem[];
}

type Kind = { t: "list"; item: string } | { t: "enum"; choices: string[]; unset?: string } | { t: "bool" } | { t: "int"; min: number; max?: number } | { t: "size" };

const isolation = ["none", "sandbox", "container", "vm"];

/** The settings in the specification's order, what each does and its values. */
const catalogue: { name: string; label: string; about: string; kind: Kind }[] = [
  { name: "source_allowlist", label: "Source allowlist", about: "Repositories apps may be built from (patterns, one a line); empty allows any.", kind: { t: "list", item: "pattern" } },
  { name: "disabled_verbs", label: "Disabled verbs", about: "Verbs no one may use, whatever their role (one a line).", kind: { t: "list", item: "verb" } },
  { name: "agent_disabled_verbs", label: "Verbs disabled for agents", about: "Verbs agent tokens (AI assistants) may not use (one a line).", kind: { t: "list", item: "verb" } },
  { name: "public_sharing", label: "Public sharing", about: "Whether an app may be shared with everyone: allowed, only behind a passcode, or not at all. Unset follows allow_anonymous_grants.", kind: { t: "enum", choices: ["allowed", "passcode_only", "none"], unset: "unset (follow allow_anonymous_grants)" } },
  { name: "allow_anonymous_grants", label: "Allow anonymous grants", about: "Whether apps may be shared with everyone, when public sharing is unset.", kind: { t: "bool" } },
  { name: "min_build_isolation", label: "Minimum build isolation", about: "The weakest isolation builds may run under.", kind: { t: "enum", choices: isolation } },
  { name: "min_runtime_isolation", label: "Minimum runtime isolation", about: "The weakest isolation workloads may run under; a runtime weaker than this is refused.", kind: { t: "enum", choices: isolation } },
  { name: "egress_allowlist", label: "Egress allowlist", about: "Hosts and networks workloads may reach (one a line); empty allows any.", kind: { t: "list", item: "host or network" } },
  { name: "require_backup_before_destroy", label: "Require a backup before destroy", about: "Deleting an app or a volume needs a backup first.", kind: { t: "bool" } },
  { name: "max_token_lifetime_days", label: "Maximum token lifetime (days)", about: "The longest a token may live; 0 means no cap.", kind: { t: "int", min: 0 } },
  { name: "max_log_disk_bytes", label: "Maximum log disk (bytes)", about: "Disk the apps’ logs may take in all; 0 means no cap.", kind: { t: "size" } },
  { name: "disable_ai_screening", label: "Disable AI screening", about: "Turn off the AI screening of sources.", kind: { t: "bool" } },
  { name: "min_security_score", label: "Minimum security score", about: "The lowest security score an app may deploy with, 0 to 100.", kind: { t: "int", min: 0, max: 100 } },
  { name: "insecure_action", label: "When an app is insecure", about: "Warn, or stop the app after the grace period.", kind: { t: "enum", choices: ["warn", "stop"] } },
  { name: "insecure_grace_hours", label: "Grace before acting (hours)", about: "How long an insecure app runs before the insecure action.", kind: { t: "int", min: 0 } },
  { name: "ignore_unfixable_findings", label: "Ignore unfixable findings", about: "Findings without a fix do not lower the score.", kind: { t: "bool" } },
  { name: "allow_private_webhooks", label: "Allow private webhooks", about: "Webhooks may reach private, loopback and link-local addresses.", kind: { t: "bool" } },
];

/** The form's text of a value (a list one item a line). */
function text(v: Value | undefined): string {
  if (Array.isArray(v)) return v.join("\n");
  return v === undefined || v === null ? "" : String(v);
}

/** The value a form's text stands for, as the API takes it. */
function valueOf(kind: Kind, s: string): Value {
  switch (kind.t) {
    case "list":
      return s
        .split("\n")
        .map((x) => x.trim())
        .filter((x) => x !== "");
    case "bool":
      return s === "true";
    case "int":
    case "size":
      return /^\s*\d+\s*$/.test(s) ? Number(s.trim()) : (s as unknown as number); // the API says what is wrong
    default:
      return s;
  }
}

export function Policy(props: AdminPageProps) {
  const canEdit = may(props.me, "install.policy.manage");
  const [cur, setCur] = useState<PolicyAnswer | null>(null);
  const [fixed, setFixed] = useState<Record<string, FixedEntry>>({});
  const [draft, setDraft] = useState<Record<string, string>>({});
  const [error, setError] = useState<unknown>(null);
  const [preview, setPreview] = useState<{ key: string; blocked: Blocked[] } | null>(null);
  const [previewError, setPreviewError] = useState<unknown>(null);
  const [previewing, setPreviewing] = useState(false);
  const [asking, setAsking] = useState<Blocked[] | null>(null);
  const [busy, setBusy] = useState(false);
  const [saved, setSaved] = useState("");

  const load = useCallback(async () => {
    try {
      const [p, c] = await Promise.all([call<PolicyAnswer>("GET", "/policy"), call<ConfigAnswer>("GET", "/config").catch(() => null)]);
      setCur(p);
      const fx: Record<string, FixedEntry> = {};
      for (const f of c?.policy_fixed ?? []) fx[f.name] = f;
      setFixed(fx);
      const d: Record<string, string> = {};
      for (const s of catalogue) d[s.name] = text(p.policy[s.name]);
      setDraft(d);
    } catch (e) {
      setError(e);
    }
  }, []);
  useEffect(() => {
    load();
  }, [load]);

  const known = new Set(catalogue.map((s) => s.name));
  // Settings this console does not know yet are shown and kept as they are.
  const extra = cur ? Object.keys(cur.policy).filter((n) => !known.has(n)) : [];
  const body = (): PolicyDoc => {
    const out: PolicyDoc = { ...(cur?.policy ?? {}) };
    for (const s of catalogue) {
      if (cur?.fixed.includes(s.name)) continue; // sent as it is: its fixed value
      out[s.name] = valueOf(s.kind, draft[s.name] ?? "");
    }
    return out;
  };
  const changed = cur ? catalogue.filter((s) => !cur.fixed.includes(s.name) && text(cur.policy[s.name]) !== text(valueOf(s.kind, draft[s.name] ?? ""))).map((s) => s.name) : [];
  const key = JSON.stringify(body());

  // The preview of the edited policy, asked again a moment after each change.
  const seq = useRef(0);
  const runPreview = useCallback(async (k: string): Promise<Blocked[] | null> => {
    const n = ++seq.current;
    setPreviewing(true);
    try {
      const r = await call<{ blocked: Blocked[] }>("POST", "/policy/preview", { policy: JSON.parse(k) });
      if (n === seq.current) {
        setPreview({ key: k, blocked: r.blocked });
        setPreviewError(null);
      }
      return r.blocked;
    } catch (e) {
      if (n === seq.current) {
        setPreview(null);
        setPreviewError(e);
      }
      return null;
    } finally {
      if (n === seq.current) setPreviewing(false);
    }
  }, []);
  useEffect(() => {
    if (!cur || !canEdit || changed.length === 0) {
      seq.current++;
      setPreview(null);
      setPreviewError(null);
      setPreviewing(false);
      return;
    }
    const t = window.setTimeout(() => runPreview(key), 300);
    return () => clearTimeout(t);
  }, [key, cur, canEdit]);

  const save = async () => {
    setAsking(null);
    setBusy(true);
    setError(null);
    try {
      const r = await call<PolicyAnswer>("PUT", "/policy", { policy: JSON.parse(key) });
      setSaved(changed.join(", "));
      setCur(r);
      const d: Record<string, string> = {};
      for (const s of catalogue) d[s.name] = text(r.policy[s.name]);
      setDraft(d);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const onSubmit = async (e: Event) => {
    e.preventDefault();
    if (busy || changed.length === 0) return;
    setSaved("");
    const blocked = preview && preview.key === key ? preview.blocked : await runPreview(key);
    if (blocked === null) return; // the preview's refusal is shown
    if (blocked.length > 0) setAsking(blocked);
    else save();
  };

  return (
    <div class="host policy">
      <h1>Host policy</h1>
      <p class="lead">Rules every app and person on this installation follows. A change is previewed before it is saved: the apps it would block are listed below the settings.</p>
      {!canEdit && <Notice>You may read the policy but not change it: that needs the verb install.policy.manage.</Notice>}
      <ErrorNote error={error} />
      {saved && <Notice>Saved: {saved}.</Notice>}
      {cur === null ? (
        <p class="placeholder tall" aria-busy="true">
          Reading the policy…
        </p>
      ) : (
        <form onSubmit={onSubmit} aria-label="Host policy settings">
          <div class="settings-grid">
            {catalogue.map((s) => (
              <Setting key={s.name} s={s} fixed={cur.fixed.includes(s.name) ? fixed[s.name] ?? { name: s.name, value: cur.policy[s.name], origin: "" } : undefined} readOnly={!canEdit} value={draft[s.name] ?? ""} changed={changed.includes(s.name)} onInput={(v) => setDraft((d) => ({ ...d, [s.name]: v }))} />
            ))}
            {extra.map((n) => (
              <div class="setting" key={n} data-setting={n}>
                <p class="setting-name">
                  <code>{n}</code>
                </p>
                <p>
                  <code>{JSON.stringify(cur.policy[n])}</code>
                </p>
                <p class="hint">This console does not know this setting; it is kept as it is.</p>
              </div>
            ))}
          </div>
          {canEdit && (
            <section class="block preview" aria-labelledby="policy-preview-h" aria-live="polite" data-preview={previewing ? "running" : preview ? String(preview.blocked.length) : ""}>
              <h2 id="policy-preview-h">Preview</h2>
              {changed.length === 0 ? (
                <p class="muted">No change yet. Edit a setting above to see which apps the change would block.</p>
              ) : previewError ? (
                <ErrorNote error={previewError} />
              ) : !preview || previewing ? (
                <p class="muted" aria-busy="true">
                  Checking which apps the change would block…
                </p>
              ) : preview.blocked.length === 0 ? (
                <p class="ok-note">This change blocks no app.</p>
              ) : (
                <>
                  <p>
                    This change would block {preview.blocked.length} {preview.blocked.length === 1 ? "app" : "apps"}:
                  </p>
                  <BlockedList blocked={preview.blocked} />
                </>
              )}
              <div class="actions">
                <button type="submit" class="primary" disabled={busy || changed.length === 0} aria-busy={busy}>
                  Save {changed.length > 0 ? "(" + changed.length + (changed.length === 1 ? " change" : " changes") + ")" : ""}
                </button>
                <button
                  type="button"
                  disabled={busy || changed.length === 0}
                  onClick={() => {
                    const d: Record<string, string> = {};
                    for (const s of catalogue) d[s.name] = text(cur.policy[s.name]);
                    setDraft(d);
                  }}
                >
                  Discard changes
                </button>
              </div>
            </section>
          )}
        </form>
      )}
      {asking && (
        <Confirm title="Save a policy that blocks apps?" action={"Save and block " + asking.length + (asking.length === 1 ? " app" : " apps")} danger onConfirm={save} onCancel={() => setAsking(null)}>
          <p>Once saved, these apps are blocked by the new policy:</p>
          <BlockedList blocked={asking} />
        </Confirm>
      )}
    </div>
  );
}

function BlockedList(props: { blocked: Blocked[] }) {
  return (
    <ul class="blocked" data-list="blocked">
      {props.blocked.map((b) => (
        <li key={b.app_id} data-app={b.app_id}>
          <Link href={"/apps/" + b.app_id}>{b.name}</Link> <code class="muted small">{b.app_id}</code>
          {b.reasons.map((r, i) => (
            <ProblemNote key={i} problem={r} />
          ))}
        </li>
      ))}
    </ul>
  );
}

function Setting(props: { s: (typeof catalogue)[number]; fixed?: FixedEntry | { name: string; value: unknown; origin: string }; readOnly: boolean; value: string; changed: boolean; onInput: (v: string) => void }) {
  const { s, fixed } = props;
  const id = "p-" + s.name;
  const disabled = !!fixed || props.readOnly;
  const hint = id + "-hint";
  const onInput = (e: Event) => props.onInput((e.currentTarget as HTMLInputElement).value);
  let control;
  switch (s.kind.t) {
    case "bool":
      control = (
        <select id={id} name={s.name} value={props.value} disabled={disabled} aria-describedby={hint} onChange={onInput}>
          <option value="true">on</option>
          <option value="false">off</option>
        </select>
      );
      break;
    case "enum":
      control = (
        <select id={id} name={s.name} value={props.value} disabled={disabled} aria-describedby={hint} onChange={onInput}>
          {s.kind.unset !== undefined && <option value="">{s.kind.unset}</option>}
          {s.kind.choices.map((c) => (
            <option key={c} value={c}>
              {c}
            </option>
          ))}
        </select>
      );
      break;
    case "list":
      control = <textarea id={id} name={s.name} rows={Math.max(2, Math.min(6, props.value.split("\n").length + 1))} value={props.value} readOnly={disabled} aria-describedby={hint} placeholder={disabled ? "empty" : "one " + s.kind.item + " a line"} onInput={onInput} />;
      break;
    default:
      control = <input id={id} name={s.name} inputMode="numeric" value={props.value} readOnly={disabled} aria-describedby={hint} onInput={onInput} />;
  }
  return (
    <div class={"setting" + (fixed ? " fixed" : "") + (props.changed ? " changed" : "")} data-setting={s.name} data-fixed={fixed ? "true" : undefined}>
      <label for={id} class="setting-name">
        {s.label} <code>{s.name}</code>
        {fixed && <span class="pill pill-plain">fixed</span>}
        {props.changed && <span class="pill pill-busy">changed</span>}
      </label>
      {control}
      <p class="hint" id={hint}>
        {s.about}
        {fixed && (
          <>
            {" "}
            <strong class="fixed-why">
              Fixed at startup by the {origins[fixed.origin] ?? "configuration"}
              {fixed.origin === "environment" ? " (SVC_POLICY_" + s.name.toUpperCase() + ")" : fixed.origin === "config_file" ? " (its policy section)" : ""}: change it there and restart the server.
            </strong>
          </>
        )}
      </p>
    </div>
  );
}
