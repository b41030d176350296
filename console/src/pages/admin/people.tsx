import { useCallback, useEffect, useState } from "preact/hooks";
import { all, call, seg, type Me } from "../../api";
import { Link } from "../../router";
import { Confirm, ErrorNote, ListTable, SecretOnce, Submit, useSubmit, when } from "../../ui";
import "./people.css";

// What the pages about people and tokens share (accounts, groups, roles,
// service tokens and the person's own tokens): the API's shapes, the
// installation roles to choose from, a secret shown once, and the token
// list with its creation form and revocation.

/** Account is an account as GET /api/v1/users answers it. */
export interface Account {
  id: string;
  username: string;
  display_name: string;
  email: string;
  email_verified: boolean;
  status: string;
  must_change_password: boolean;
  role_id: string | null;
  source: string;
  created_at: string;
}

/** Group is a group as GET /api/v1/groups answers it. */
export interface Group {
  id: string;
  name: string;
  source: string;
  role_id: string | null;
  member_ids: string[] | null;
  created_at: string;
}

/** Role is a role as GET /api/v1/roles answers it. */
export interface Role {
  id: string;
  name: string;
  scope: "install" | "app";
  builtin: boolean;
  verbs: string[];
}

/** Token is a token as GET /api/v1/tokens answers it (never its secret). */
export interface Token {
  id: string;
  name: string;
  kind: string;
  agent: boolean;
  owner_id: string;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
}

/** AppAccess is an app an account or a group has a grant on (GET …/apps). */
interface AppAccess {
  app: { id: string; name: string; slug: string };
  role_id: string | null;
  via: string | null;
  can_open: boolean;
  can_manage: boolean;
}

/**
 * AppAccessList lists the apps an account or a group has a grant on, among
 * those the signed-in person can see (GET /api/v1/users/{id}/apps or
 * /groups/{id}/apps): the role on each, how, whether it opens the app.
 */
export function AppAccessList(props: { path: string; title: string; empty: string }) {
  const [apps, setApps] = useState<AppAccess[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    all<AppAccess>(props.path).then(setApps, (e) => (setApps([]), setError(e)));
  }, [props.path]);
  const id = "apps-" + props.path.replace(/[^a-z0-9]+/gi, "-");
  return (
    <>
      <h3 id={id}>{props.title}</h3>
      <ErrorNote error={error} />
      {apps === null ? (
        <p class="muted">Reading…</p>
      ) : apps.length === 0 ? (
        !error && <p class="muted">{props.empty}</p>
      ) : (
        <ul aria-labelledby={id} class="app-access">
          {apps.map((a) => (
            <li key={a.app.id}>
              <Link href={"/apps/" + a.app.id}>{a.app.name}</Link>{" "}
              <span class="muted">{[a.role_id ? "role " + a.role_id : "", a.via ? "via " + a.via : "", a.can_open ? "opens it" : "", a.can_manage ? "manages it" : ""].filter((x) => x).join(" · ")}</span>
            </li>
          ))}
        </ul>
      )}
    </>
  );
}

/** can says whether the signed-in person holds an installation verb. */
export function can(me: Me, verb: string): boolean {
  return me.verbs.includes(verb);
}

/** useInstallRoles reads the installation roles (GET /api/v1/roles). */
export function useInstallRoles(): { roles: Role[] | null; error: unknown } {
  const [roles, setRoles] = useState<Role[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    all<Role>("/roles?scope=install").then(setRoles, setError);
  }, []);
  return { roles, error };
}

/** roleName names a role by its ID among those read. */
export function roleName(roles: Role[] | null, id: string | null): string {
  if (!id) return "none";
  return roles?.find((r) => r.id === id)?.name ?? id;
}

/**
 * RoleForm sets or removes an installation role (of an account or a
 * group): PUT …/role {role_id}, or DELETE …/role for none.
 */
export function RoleForm(props: { path: string; current: string | null; roles: Role[] | null; idPrefix: string; onDone: () => Promise<void> }) {
  const [choice, setChoice] = useState(props.current ?? "");
  useEffect(() => setChoice(props.current ?? ""), [props.current]);
  const form = useSubmit(async () => {
    if (choice === "") {
      await call("DELETE", props.path + "/role");
    } else {
      await call("PUT", props.path + "/role", { role_id: choice });
    }
    await props.onDone();
  });
  const id = props.idPrefix + "-role";
  return (
    <form class="inline-form" onSubmit={form.onSubmit} aria-describedby={id + "-error"}>
      <label for={id}>Installation role</label>
      <select id={id} name="role_id" value={choice} onChange={(e) => setChoice((e.currentTarget as HTMLSelectElement).value)}>
        <option value="">No installation role</option>
        {(props.roles ?? []).map((r) => (
          <option key={r.id} value={r.id}>
            {r.name} ({r.id})
          </option>
        ))}
      </select>
      <Submit busy={form.busy}>Save role</Submit>
      <ErrorNote error={form.error} id={id + "-error"} />
    </form>
  );
}

/** useConfirmed runs an action after a confirmation, keeping its error. */
export function useConfirmed() {
  const [asking, setAsking] = useState<null | { title: string; action: string; body: string; run: () => Promise<void> }>(null);
  const [error, setError] = useState<unknown>(null);
  const dialog = asking && (
    <Confirm
      title={asking.title}
      action={asking.action}
      danger
      onCancel={() => setAsking(null)}
      onConfirm={async () => {
        const run = asking.run;
        setAsking(null);
        setError(null);
        try {
          await run();
        } catch (e) {
          setError(e);
        }
      }}
    >
      <p>{asking.body}</p>
    </Confirm>
  );
  return { ask: setAsking, dialog, error, setError };
}

/**
 * TokenManager lists tokens of one kind, mints one (the secret shown
 * once) and revokes one after a confirmation: the person's own delegated
 * tokens (/tokens) or the installation's service tokens (/tokens/service).
 */
export function TokenManager(props: { kind: "own" | "service"; canManage: boolean }) {
  const path = props.kind === "own" ? "/tokens" : "/tokens/service";
  const [items, setItems] = useState<Token[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [name, setName] = useState("");
  const [days, setDays] = useState("");
  const [agent, setAgent] = useState(false);
  const [minted, setMinted] = useState<{ token: Token; secret: string } | null>(null);
  const confirmed = useConfirmed();
  const load = useCallback(async () => {
    try {
      setItems(await all<Token>(path));
      setError(null);
    } catch (e) {
      setError(e);
      setItems([]);
    }
  }, [path]);
  useEffect(() => {
    load();
  }, [load]);
  const form = useSubmit(async () => {
    const body: { name: string; agent: boolean; expires_in_days?: number } = { name: name.trim(), agent };
    if (days.trim() !== "") body.expires_in_days = Number(days.trim());
    const got = await call<{ token: Token; secret: string }>("POST", path, body);
    setMinted(got);
    setName("");
    setDays("");
    setAgent(false);
    await load();
  });
  const revoke = (t: Token) =>
    confirmed.ask({
      title: "Revoke " + t.name + "?",
      action: "Revoke " + t.name,
      body: "Every caller using this token is refused from now on (AUTH_TOKEN_INVALID). This cannot be undone.",
      run: async () => {
        await call("DELETE", "/tokens/" + seg(t.id));
        if (minted?.token.id === t.id) setMinted(null);
        await load();
      },
    });
  const what = props.kind === "own" ? "token" : "service token";
  return (
    <div class={"tokens tokens-" + props.kind}>
      {props.canManage && (
        <form class="panel create-form" onSubmit={form.onSubmit} aria-labelledby="token-new-h" aria-describedby="token-new-error">
          <h2 id="token-new-h">New {what}</h2>
          <div class="form-row">
            <div class="field">
              <label for="token-name">Name</label>
              <input id="token-name" name="token_name" required maxLength={100} value={name} onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)} aria-describedby="token-name-hint" />
              <p class="hint" id="token-name-hint">
                To tell it by, e.g. “ci deploys”.
              </p>
            </div>
            <div class="field">
              <label for="token-days">Expires in days</label>
              <input id="token-days" name="expires_in_days" inputMode="numeric" pattern="[0-9]*" value={days} onInput={(e) => setDays((e.currentTarget as HTMLInputElement).value)} aria-describedby="token-days-hint" />
              <p class="hint" id="token-days-hint">
                Empty: never, or host policy’s longest lifetime.
              </p>
            </div>
          </div>
          <div class="check">
            <input id="token-agent" name="agent" type="checkbox" checked={agent} onChange={(e) => setAgent((e.currentTarget as HTMLInputElement).checked)} aria-describedby="token-agent-hint" />
            <label for="token-agent">For an automated caller (an AI assistant)</label>
            <p class="hint" id="token-agent-hint">
              Host policy’s agent_disabled_verbs apply to it.
            </p>
          </div>
          <ErrorNote error={form.error} id="token-new-error" />
          <Submit busy={form.busy}>Create {what}</Submit>
        </form>
      )}
      {minted && (
        <SecretOnce title={"The secret of “" + minted.token.name + "”"} value={minted.secret} name="token_secret" onDone={() => setMinted(null)}>
          <p>
            Send it as <code>Authorization: Bearer …</code>, or give it to <code>svc login --token</code>.
          </p>
        </SecretOnce>
      )}
      <ErrorNote error={error ?? confirmed.error} />
      {confirmed.dialog}
      <section class="block" aria-labelledby="token-list-h" hidden={!!error}>
        <h2 id="token-list-h">{props.kind === "own" ? "Your tokens" : "Service tokens"}</h2>
        {items !== null && items.length === 0 && !error ? (
          <div class="empty-state small">
            <p>
              No {what}s yet.{" "}
              {props.canManage ? "Create one above for a script, CI or the CLI (svc login --token)." : "Someone holding install.tokens.manage creates them."}
              {props.kind === "service" && " A service token holds only what is shared with it: share apps with it on each app’s Sharing page."}
            </p>
          </div>
        ) : (
          <ListTable
            fixed
            name={"tokens-" + props.kind}
            caption={props.kind === "own" ? "Your tokens" : "Service tokens"}
            columns={["Name", "ID", "Created", "Expires", "Last used", ""]}
            rows={
              items &&
              items.map((t) => (
                <tr key={t.id} data-token={t.id}>
                  <th scope="row">
                    {t.name}
                    {t.agent && <span class="pill pill-plain tag">agent</span>}
                  </th>
                  <td>
                    <code>{t.id}</code>
                  </td>
                  <td>{when(t.created_at)}</td>
                  <td>{t.expires_at ? when(t.expires_at) : "never"}</td>
                  <td>{t.last_used_at ? when(t.last_used_at) : "never"}</td>
                  <td class="row-actions">
                    {props.canManage && (
                      <button type="button" class="small" onClick={() => revoke(t)} aria-label={"Revoke " + t.name}>
                        Revoke
                      </button>
                    )}
                  </td>
                </tr>
              ))
            }
          />
        )}
      </section>
    </div>
  );
}
