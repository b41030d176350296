import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useState } from "preact/hooks";
import { call, seg } from "../../api";
import { Confirm, ErrorNote, Notice, when } from "../../ui";
import type { AdminPageProps } from "../admin";
import { may, pages } from "./host";
import "./host.css";

// Adapters, /admin/adapters: the adapters this server runs, by category
// (GET /api/v1/adapters: configured ones and the embedded defaults, their
// settings, the names of the credentials set — never a value —, live
// health and capabilities, and whether each waits for a restart), the
// kinds this build can run (GET /api/v1/adapters/kinds), and, for those
// holding install.adapters.manage, add (POST /api/v1/adapters), edit
// settings and set, replace or remove a credential (write-only: the form
// never holds a credential's value, only what is typed to replace it),
// remove an adapter (DELETE, confirmed) and restart the server to load
// the changes (POST /api/v1/restart, confirmed).

interface Setting {
  name: string;
  description: string;
  credential: boolean;
  required: boolean;
  default?: string;
  example?: string;
}

interface Kind {
  category: string;
  kind: string;
  description: string;
  settings: Setting[];
  default: boolean;
}

interface View {
  adapter_id: string;
  category: string;
  kind: string;
  config: Record<string, unknown>;
  credentials_set: string[];
  capabilities: Record<string, unknown> | null;
  primary: boolean;
  builtin: boolean;
  loaded: boolean;
  error: string | null;
  pending_restart: boolean;
  health: { healthy: boolean; reason?: string; since: string } | null;
  deleted: boolean;
  revision: number;
  created_at: string | null;
  updated_at: string | null;
}

interface AdapterList {
  items: View[];
  next_cursor?: string;
  restart_needed: boolean;
  started_at: string;
  loading: boolean;
}

interface KindList {
  categories: string[];
  items: Kind[];
  next_cursor?: string;
}

export function Adapters(props: AdminPageProps) {
  const canManage = may(props.me, "install.adapters.manage");
  const [list, setList] = useState<AdapterList | null>(null);
  const [kinds, setKinds] = useState<KindList | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [adding, setAdding] = useState("");
  const [notice, setNotice] = useState("");
  const [restarting, setRestarting] = useState<"ask" | "busy" | "">("");

  const load = useCallback(async () => {
    try {
      const [l, k] = await Promise.all([pages<View, AdapterList>("/adapters"), pages<Kind, KindList>("/adapters/kinds")]);
      setList(l);
      setKinds(k);
    } catch (e) {
      setError(e);
    }
  }, []);
  useEffect(() => {
    load();
  }, [load]);

  const kindOf = (category: string, kind: string) => kinds?.items.find((k) => k.category === category && k.kind === kind);
  const changed = async (what: string) => {
    setNotice(what);
    await load();
  };
  const restart = async () => {
    setRestarting("busy");
    setError(null);
    try {
      const r = await call<{ started_at: string }>("POST", "/restart");
      setNotice("The server is restarting; the adapters load as it starts. This page reads them again in a moment.");
      // The next generation answers with a later started_at.
      const deadline = Date.now() + 120000;
      while (Date.now() < deadline) {
        await new Promise((res) => setTimeout(res, 1000));
        try {
          const l = await pages<View, AdapterList>("/adapters");
          if (l.started_at !== r.started_at) {
            setList(l);
            setNotice("Restarted at " + when(l.started_at) + ".");
            break;
          }
        } catch {
          /* not back yet */
        }
      }
    } catch (e) {
      setError(e);
    } finally {
      setRestarting("");
    }
  };

  const categories = kinds?.categories ?? [];
  return (
    <div class="host adapters">
      <h1>Adapters</h1>
      <p class="lead">What svc runs apps on and keeps their secrets, routes, accounts and resources with. A change is stored at once and takes effect when the server restarts. Credentials are write-only: they are stored encrypted and never shown again.</p>
      {!canManage && <Notice>You may see the adapters but not change them: that needs the verb install.adapters.manage.</Notice>}
      <ErrorNote error={error} />
      {notice && <Notice>{notice}</Notice>}
      <div class={"restart-bar" + (list?.restart_needed ? " needed" : "")} role="status" data-restart-needed={list ? String(list.restart_needed) : ""}>
        {list === null ? (
          <span class="muted">Reading the adapters…</span>
        ) : list.restart_needed ? (
          <>
            <strong>A restart is needed</strong> to load the changes marked “waits for restart”. Started {when(list.started_at)}.
            {canManage && (
              <button type="button" class="danger small" disabled={restarting !== ""} aria-busy={restarting === "busy"} onClick={() => setRestarting("ask")}>
                Restart the server
              </button>
            )}
          </>
        ) : (
          <span>
            Every adapter is loaded as configured{list.loading ? " (still loading)" : ""}. Started {when(list.started_at)}.
          </span>
        )}
      </div>
      {restarting === "ask" && (
        <Confirm title="Restart the server?" action="Restart" danger onConfirm={restart} onCancel={() => setRestarting("")}>
          <p>Requests in flight finish, then the server restarts and loads the adapters and the configuration file (the environment is not read again). Apps are unreachable for some seconds.</p>
        </Confirm>
      )}
      {list === null || kinds === null ? (
        !error && (
          <p class="placeholder tall" aria-busy="true">
            Reading the adapters…
          </p>
        )
      ) : (
        categories.map((c) => {
          const items = list.items.filter((a) => a.category === c);
          const addable = kinds.items.filter((k) => k.category === c && !k.default);
          return (
            <section key={c} class="block" aria-labelledby={"cat-" + c} data-category={c}>
              <div class="section-head">
                <h2 id={"cat-" + c}>{c}</h2>
                {canManage && addable.length > 0 && (
                  <button type="button" class="small" aria-expanded={adding === c} aria-controls={"add-" + c} onClick={() => setAdding(adding === c ? "" : c)}>
                    Add a {c} adapter
                  </button>
                )}
              </div>
              {adding === c && (
                <AddForm
                  id={"add-" + c}
                  kinds={addable}
                  existing={items}
                  onDone={async (v) => {
                    setAdding("");
                    await changed("Added " + v.adapter_id + ". It loads when the server restarts.");
                  }}
                  onCancel={() => setAdding("")}
                />
              )}
              {items.length === 0 ? (
                <p class="muted">
                  No {c} adapter is configured.
                  {addable.length > 0 ? (canManage ? " Add one with the button above." : "") : " This build has no kind to add."}
                </p>
              ) : (
                items.map((a) => <AdapterCard key={a.adapter_id} a={a} kind={kindOf(a.category, a.kind)} canManage={canManage} onChanged={changed} />)
              )}
            </section>
          );
        })
      )}
      {kinds && (
        <section class="block" aria-labelledby="kinds-h">
          <h2 id="kinds-h">Kinds this build can run</h2>
          <table class="list" data-table="kinds">
            <caption class="visually-hidden">Adapter kinds</caption>
            <thead>
              <tr>
                <th scope="col">Category</th>
                <th scope="col">Kind</th>
                <th scope="col">What it does</th>
                <th scope="col">Settings</th>
              </tr>
            </thead>
            <tbody>
              {kinds.items.map((k) => (
                <tr key={k.category + "/" + k.kind} data-kind={k.category + "/" + k.kind}>
                  <td>{k.category}</td>
                  <th scope="row">
                    {k.kind}
                    {k.default && <span class="badge">built in</span>}
                  </th>
                  <td class="small">{k.description}</td>
                  <td class="small">
                    {k.settings.length === 0
                      ? "none"
                      : k.settings.map((s, i) => (
                          <span key={s.name}>
                            {i > 0 && ", "}
                            <code>{s.name}</code>
                            {s.credential ? " (credential)" : s.required ? " (required)" : ""}
                          </span>
                        ))}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
    </div>
  );
}

function AdapterCard(props: { a: View; kind?: Kind; canManage: boolean; onChanged: (what: string) => Promise<void> }) {
  const { a, kind } = props;
  const [editing, setEditing] = useState(false);
  const [removing, setRemoving] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const creds = kind?.settings.filter((s) => s.credential) ?? a.credentials_set.map((n) => ({ name: n, description: "", credential: true, required: false }));
  const settings = kind?.settings.filter((s) => !s.credential) ?? Object.keys(a.config).map((n) => ({ name: n, description: "", credential: false, required: false }));
  const remove = async () => {
    setRemoving(false);
    setError(null);
    try {
      await call("DELETE", "/adapters/" + seg(a.adapter_id));
      await props.onChanged("Removed " + a.adapter_id + ". It stays loaded until the server restarts.");
    } catch (e) {
      setError(e);
    }
  };
  return (
    <article class="panel adapter" data-adapter={a.adapter_id} aria-labelledby={"ad-" + a.adapter_id}>
      <header class="adapter-head">
        <h3 id={"ad-" + a.adapter_id}>
          {a.kind} <code class="muted small">{a.adapter_id}</code>
        </h3>
        <div class="pills">
          {a.primary && <span class="pill pill-ok">primary</span>}
          {a.builtin && <span class="pill pill-plain">built in</span>}
          {a.deleted ? <span class="pill pill-bad">removed</span> : a.loaded ? <span class="pill pill-ok">loaded</span> : <span class="pill pill-plain">not loaded</span>}
          {a.health && (a.health.healthy ? <span class="pill pill-ok">healthy</span> : <span class="pill pill-bad">unhealthy</span>)}
          {a.pending_restart && <span class="pill pill-busy">waits for restart</span>}
        </div>
      </header>
      {a.error && <p class="error-line">Did not load: {a.error}</p>}
      {a.health && !a.health.healthy && a.health.reason && (
        <p class="error-line">
          Unhealthy since {when(a.health.since)}: {a.health.reason}
        </p>
      )}
      {editing ? (
        <ConfigForm
          kind={kind}
          settings={settings}
          creds={creds}
          view={a}
          onCancel={() => setEditing(false)}
          onSaved={async () => {
            setEditing(false);
            await props.onChanged("Saved " + a.adapter_id + ". The change loads when the server restarts.");
          }}
        />
      ) : (
        <dl class="facts adapter-config">
          {settings.map((s) => (
            <Fact key={s.name} name={s.name} about={s.description}>
              {a.config[s.name] === undefined || a.config[s.name] === "" ? <span class="muted">not set</span> : <code>{String(a.config[s.name])}</code>}
            </Fact>
          ))}
          {creds.map((s) => (
            <Fact key={s.name} name={s.name} about={s.description}>
              <span data-credential={s.name}>{a.credentials_set.includes(s.name) ? <span class="pill pill-ok">set</span> : <span class="pill pill-plain">not set</span>} <span class="muted small">write-only</span></span>
            </Fact>
          ))}
          {a.capabilities && Object.keys(a.capabilities).length > 0 && (
            <Fact name="capabilities" about="What the loaded adapter reports it can do.">
              <span class="small">
                {Object.entries(a.capabilities)
                  .map(([k, v]) => k + ": " + (typeof v === "string" ? v : JSON.stringify(v)))
                  .join(" · ")}
              </span>
            </Fact>
          )}
          {a.updated_at && (
            <Fact name="changed" about="">
              {when(a.updated_at)} (revision {a.revision})
            </Fact>
          )}
        </dl>
      )}
      <ErrorNote error={error} />
      {props.canManage && !editing && !a.deleted && (settings.length > 0 || creds.length > 0 || !a.builtin) && (
        <div class="actions">
          {(settings.length > 0 || creds.length > 0) && (
            <button type="button" class="small" onClick={() => setEditing(true)} aria-label={"Edit " + a.adapter_id}>
              Edit
            </button>
          )}
          {!a.builtin && (
            <button type="button" class="small" onClick={() => setRemoving(true)} aria-label={"Remove " + a.adapter_id}>
              Remove
            </button>
          )}
        </div>
      )}
      {removing && (
        <Confirm title={"Remove " + a.adapter_id + "?"} action="Remove" danger onConfirm={remove} onCancel={() => setRemoving(false)}>
          <p>
            The {a.category} adapter {a.kind} is removed from the configuration; it stays loaded until the server restarts. The API refuses while anything depends on it, and says what.
          </p>
        </Confirm>
      )}
    </article>
  );
}

function Fact(props: { name: string; about: string; children: ComponentChildren }) {
  return (
    <>
      <dt title={props.about || undefined}>
        <code>{props.name}</code>
      </dt>
      <dd>{props.children}</dd>
    </>
  );
}

/**
 * ConfigForm edits an adapter's settings and credentials, or makes a new
 * one (view absent). A setting emptied returns to its default (null); a
 * credential field is empty unless something is typed to set or replace
 * it (left empty, the credential keeps its value); Remove sends null.
 */
function ConfigForm(props: { kind?: Kind; settings: Setting[]; creds: Setting[]; view?: View; newOne?: boolean; onSaved: (v: View) => Promise<void>; onCancel: () => void }) {
  const { view, kind } = props;
  const initial: Record<string, string> = {};
  for (const s of props.settings) {
    const v = view?.config[s.name];
    initial[s.name] = v === undefined || v === null ? "" : String(v);
  }
  const [vals, setVals] = useState(initial);
  const [creds, setCreds] = useState<Record<string, string>>({});
  const [drop, setDrop] = useState<Record<string, boolean>>({});
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const prefix = (view?.adapter_id ?? "new-" + (kind?.category ?? "") + "-" + (kind?.kind ?? "")) + "-";
  const submit = async (e: Event) => {
    e.preventDefault();
    if (!kind) return;
    setBusy(true);
    setError(null);
    const config: Record<string, string | null> = {};
    for (const s of props.settings) {
      const v = vals[s.name].trim();
      if (v !== initial[s.name]) config[s.name] = v === "" ? null : v;
      else if (!view && v !== "") config[s.name] = v;
    }
    const credentials: Record<string, string | null> = {};
    for (const s of props.creds) {
      if (drop[s.name]) credentials[s.name] = null;
      else if (creds[s.name]) credentials[s.name] = creds[s.name];
    }
    try {
      const body: Record<string, unknown> = { category: kind.category, kind: kind.kind, config, credentials };
      if (view) body.adapter_id = view.adapter_id;
      else if (props.newOne) body.new = true;
      const r = await call<{ adapter: View }>("POST", "/adapters", body);
      setCreds({});
      await props.onSaved(r.adapter);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  if (!kind) return <p class="muted">This build does not know the kind {view?.kind}, so it cannot be edited here.</p>;
  return (
    <form class="adapter-form" onSubmit={submit} autocomplete="off">
      {props.settings.map((s) => (
        <div class="field" key={s.name}>
          <label for={prefix + s.name}>
            {s.name}
            {s.required && <span class="muted"> (required)</span>}
          </label>
          <input
            id={prefix + s.name}
            name={s.name}
            value={vals[s.name]}
            placeholder={s.default ? "default: " + s.default : s.example ? "e.g. " + s.example : ""}
            aria-describedby={prefix + s.name + "-hint"}
            onInput={(e) => {
              const v = (e.currentTarget as HTMLInputElement).value;
              setVals((o) => ({ ...o, [s.name]: v }));
            }}
          />
          <p class="hint" id={prefix + s.name + "-hint"}>
            {sentence(s.description)}
            {s.default ? " Empty for the default, " + s.default + "." : ""}
          </p>
        </div>
      ))}
      {props.creds.map((s) => {
        const isSet = !!view?.credentials_set.includes(s.name);
        return (
          <div class="field credential" key={s.name} data-credential-field={s.name}>
            <label for={prefix + "cred-" + s.name}>
              {isSet ? "Replace " : "Set "}
              {s.name}
              {s.required && !isSet && <span class="muted"> (required)</span>}
            </label>
            <input
              id={prefix + "cred-" + s.name}
              name={"credential_" + s.name}
              type="password"
              autocomplete="new-password"
              value={creds[s.name] ?? ""}
              disabled={!!drop[s.name]}
              placeholder={isSet ? "set: leave empty to keep it" : "not set"}
              aria-describedby={prefix + "cred-" + s.name + "-hint"}
              onInput={(e) => {
                const v = (e.currentTarget as HTMLInputElement).value;
                setCreds((o) => ({ ...o, [s.name]: v }));
              }}
            />
            <p class="hint" id={prefix + "cred-" + s.name + "-hint"}>
              {sentence(s.description)} Write-only: {isSet ? "it is set; its value is never shown. Type a new one to replace it." : "not set yet."}
            </p>
            {isSet && (
              <label class="check">
                <input
                  type="checkbox"
                  name={"remove_" + s.name}
                  checked={!!drop[s.name]}
                  onChange={(e) => {
                    const v = (e.currentTarget as HTMLInputElement).checked;
                    setDrop((o) => ({ ...o, [s.name]: v }));
                  }}
                />{" "}
                Remove {s.name}
              </label>
            )}
          </div>
        );
      })}
      <ErrorNote error={error} />
      <div class="actions">
        <button type="submit" class="primary" disabled={busy} aria-busy={busy}>
          {view ? "Save" : "Add"}
        </button>
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/** sentence ends a description with a full stop. */
function sentence(s: string): string {
  return !s || /[.!?]$/.test(s) ? s : s + ".";
}

function AddForm(props: { id: string; kinds: Kind[]; existing: View[]; onDone: (v: View) => Promise<void>; onCancel: () => void }) {
  const [name, setName] = useState(props.kinds[0]?.kind ?? "");
  const kind = props.kinds.find((k) => k.kind === name);
  const id = props.id + "-kind";
  return (
    <div class="panel add-adapter" id={props.id}>
      <div class="field">
        <label for={id}>Kind</label>
        <select id={id} name="kind" value={name} onChange={(e) => setName((e.currentTarget as HTMLSelectElement).value)} aria-describedby={id + "-hint"}>
          {props.kinds.map((k) => (
            <option key={k.kind} value={k.kind}>
              {k.kind}
            </option>
          ))}
        </select>
        <p class="hint" id={id + "-hint"}>
          {kind?.description}
        </p>
      </div>
      {kind && (
        <ConfigForm
          key={kind.kind}
          kind={kind}
          settings={kind.settings.filter((s) => !s.credential)}
          creds={kind.settings.filter((s) => s.credential)}
          newOne={props.existing.some((a) => a.kind === kind.kind)}
          onSaved={props.onDone}
          onCancel={props.onCancel}
        />
      )}
    </div>
  );
}
