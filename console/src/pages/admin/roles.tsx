import { useCallback, useEffect, useMemo, useState } from "preact/hooks";
import { all, call, seg } from "../../api";
import { ErrorNote, ListTable, Notice, Submit, useSubmit } from "../../ui";
import type { AdminPageProps } from "../admin";
import { can, useConfirmed, type Role } from "./people";

// Roles and verbs, /admin/roles: the built-in roles (fixed) and the custom
// ones (GET /api/v1/roles?scope=all), each with its verbs; a new custom
// role composed from verbs (POST /api/v1/roles); delete a custom one
// (DELETE). The API has no change of a role in place. What each verb
// allows is read from the API's own reference (GET /api/v1/reference): the
// endpoints that require it, and the security notes naming it. Verbs
// come from GET /api/v1/verbs, never from this page.

interface Endpoint {
  method: string;
  path: string;
  verb?: string;
  summary: string;
}

interface Reference {
  endpoints: Endpoint[];
  security: string[];
}

interface Verbs {
  install: string[];
  app: string[];
}

export function Roles(props: AdminPageProps) {
  const manage = can(props.me, "install.users.manage");
  const [roles, setRoles] = useState<Role[] | null>(null);
  const [verbs, setVerbs] = useState<Verbs | null>(null);
  const [ref, setRef] = useState<Reference | null>(null);
  const [error, setError] = useState<unknown>(null);
  const confirmed = useConfirmed();
  const load = useCallback(async () => {
    try {
      setRoles(await all<Role>("/roles?scope=all"));
    } catch (e) {
      setError(e);
      setRoles([]);
    }
  }, []);
  useEffect(() => {
    load();
    call<Verbs>("GET", "/verbs").then(setVerbs, setError);
    call<Reference>("GET", "/reference").then(setRef, setError);
  }, [load]);
  const del = (r: Role) =>
    confirmed.ask({
      title: "Delete the role " + r.name + "?",
      action: "Delete " + r.name,
      body: "The role and every grant of it are deleted: whoever holds it through them loses its verbs. This cannot be undone.",
      run: async () => {
        await call("DELETE", "/roles/" + seg(r.id));
        await load();
      },
    });

  return (
    <section class="roles">
      <h1>Roles and verbs</h1>
      <p class="lead">
        A role is a set of verbs, given across the installation (to an account or a group) or on one app (when it is shared). Holding a verb implies no other. Built-in roles
        are fixed: they cannot be changed or deleted.
      </p>
      {!manage && can(props.me, "install.view") && <Notice>Composing and deleting custom roles needs install.users.manage, which you do not hold.</Notice>}
      <ErrorNote error={error ?? confirmed.error} />
      {confirmed.dialog}
      {manage && verbs && <CreateRole verbs={verbs} onCreated={load} />}
      {(["install", "app"] as const).map((scope) => (
        <section class="block" key={scope} aria-labelledby={"roles-" + scope + "-h"} hidden={!!error}>
          <h2 id={"roles-" + scope + "-h"}>{scope === "install" ? "Installation roles" : "App roles"}</h2>
          <ListTable
            fixed
            name={"roles-" + scope}
            caption={scope === "install" ? "Installation roles" : "App roles"}
            columns={["Role", "Kind", "Verbs", ""]}
            rows={
              roles &&
              roles
                .filter((r) => r.scope === scope)
                .map((r) => (
                  <tr key={r.id} data-role={r.id}>
                    <th scope="row">
                      {r.name} <code class="muted small">{r.id}</code>
                    </th>
                    <td>{r.builtin ? <span class="pill pill-plain">built in, fixed</span> : <span class="pill pill-ok">custom</span>}</td>
                    <td>
                      <ul class="verb-list">
                        {r.verbs.map((v) => (
                          <li key={v}>
                            <a href={"#verb-" + v}>
                              <code>{v}</code>
                            </a>
                          </li>
                        ))}
                      </ul>
                    </td>
                    <td class="row-actions">
                      {!r.builtin && manage && (
                        <button type="button" class="small" onClick={() => del(r)} aria-label={"Delete the role " + r.name}>
                          Delete
                        </button>
                      )}
                    </td>
                  </tr>
                ))
            }
          />
        </section>
      ))}
      {!error && <VerbCatalogue verbs={verbs} reference={ref} />}
    </section>
  );
}

/** CreateRole composes a custom role from the verbs of one scope. */
function CreateRole(props: { verbs: Verbs; onCreated: () => Promise<void> }) {
  const [name, setName] = useState("");
  const [scope, setScope] = useState<"install" | "app">("app");
  const [chosen, setChosen] = useState<string[]>([]);
  const [note, setNote] = useState("");
  const form = useSubmit(async () => {
    setNote("");
    const got = await call<{ role: Role }>("POST", "/roles", { name: name.trim(), scope, verbs: chosen });
    setName("");
    setChosen([]);
    setNote("The role " + got.role.name + " (" + got.role.id + ") is created.");
    await props.onCreated();
  });
  const toggle = (v: string, on: boolean) => setChosen((c) => (on ? [...c.filter((x) => x !== v), v] : c.filter((x) => x !== v)));
  return (
    <form class="panel create-form" onSubmit={form.onSubmit} aria-labelledby="role-new-h" aria-describedby="role-new-error">
      <h2 id="role-new-h">New custom role</h2>
      <div class="form-row">
        <div class="field">
          <label for="role-name">Name</label>
          <input id="role-name" name="role_name" required maxLength={100} value={name} onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)} />
        </div>
        <fieldset class="scope">
          <legend>Applies</legend>
          {(["app", "install"] as const).map((s) => (
            <span class="check" key={s}>
              <input
                type="radio"
                id={"role-scope-" + s}
                name="role_scope"
                value={s}
                checked={scope === s}
                onChange={() => {
                  setScope(s);
                  setChosen([]);
                }}
              />
              <label for={"role-scope-" + s}>{s === "app" ? "on an app it is shared on" : "across the installation"}</label>
            </span>
          ))}
        </fieldset>
      </div>
      <fieldset class="verbs">
        <legend>Verbs</legend>
        {props.verbs[scope].map((v) => (
          <span class="check" key={v}>
            <input type="checkbox" id={"role-verb-" + v} name="role_verb" value={v} checked={chosen.includes(v)} onChange={(e) => toggle(v, (e.currentTarget as HTMLInputElement).checked)} />
            <label for={"role-verb-" + v}>
              <code>{v}</code>
            </label>
          </span>
        ))}
      </fieldset>
      <ErrorNote error={form.error} id="role-new-error" />
      <p class="status" role="status" aria-live="polite">
        {note}
      </p>
      <Submit busy={form.busy}>Create role</Submit>
    </form>
  );
}

/** VerbCatalogue says what each verb allows, from the API's reference. */
function VerbCatalogue(props: { verbs: Verbs | null; reference: Reference | null }) {
  const byVerb = useMemo(() => {
    const m = new Map<string, Endpoint[]>();
    for (const e of props.reference?.endpoints ?? []) {
      if (!e.verb) continue;
      m.set(e.verb, [...(m.get(e.verb) ?? []), e]);
    }
    return m;
  }, [props.reference]);
  const verbs = props.verbs ? [...props.verbs.install.map((v) => ["install", v]), ...props.verbs.app.map((v) => ["app", v])] : [];
  return (
    <section class="block" aria-labelledby="verbs-h">
      <h2 id="verbs-h">What each verb allows</h2>
      <p class="hint">The endpoints of the API that require each verb, as the server’s reference lists them; the console and the CLI do nothing the API does not.</p>
      {props.verbs === null ? (
        <p class="placeholder" aria-busy="true">
          Reading the verbs…
        </p>
      ) : (
        <dl class="verbs-catalogue">
          {verbs.map(([scope, v]) => {
            const eps = byVerb.get(v) ?? [];
            const notes = (props.reference?.security ?? []).filter((n) => n.includes(v));
            return (
              <div key={v} id={"verb-" + v} data-verb={v}>
                <dt>
                  <code>{v}</code> <span class="muted small">{scope === "install" ? "installation" : "on an app"}</span>
                </dt>
                <dd>
                  {props.reference === null ? (
                    <span class="muted">…</span>
                  ) : eps.length === 0 ? (
                    <span class="muted">No endpoint of this server requires it yet.</span>
                  ) : (
                    <details>
                      <summary>
                        {eps.length} endpoint{eps.length === 1 ? "" : "s"}: {eps.map((e) => e.method + " " + e.path.replace(/^\/api\/v1/, "")).slice(0, 3).join(", ")}
                        {eps.length > 3 ? ", …" : ""}
                      </summary>
                      <ul>
                        {eps.map((e) => (
                          <li key={e.method + e.path}>
                            <code>
                              {e.method} {e.path}
                            </code>
                            : {e.summary}
                          </li>
                        ))}
                      </ul>
                    </details>
                  )}
                  {notes.map((n) => (
                    <p key={n} class="note small">
                      {n}
                    </p>
                  ))}
                </dd>
              </div>
            );
          })}
        </dl>
      )}
    </section>
  );
}
