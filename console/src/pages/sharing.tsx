import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { all, ApiError, call, seg } from "../api";
import { Confirm, ErrorNote, ListTable, Submit, useSubmit, when } from "../ui";
import type { AppPageProps } from "./app";
import { Listed } from "./lists";
import "./sharing.css";

// Sharing, /apps/<app ID>/sharing: who can open the app (access: its
// data-plane grants, the grant to everyone with whether it asks a
// passcode) and who administers it (management: control-plane grants with
// an app role), from GET …/grants; share it (POST …/grants) with a user or
// a group found by principal search (GET …/principals?q=, debounced, in a
// combobox), a service token, or everyone with or without a passcode;
// change a management grant's role and the passcode of the grant to
// everyone (PATCH), remove a grant (DELETE, confirmed). The roles offered
// are the app roles GET /roles?scope=app lists (for a caller without
// install.view, the built-in ones). Every refusal shows the API's message.

/** Grant is a grant as GET …/grants shows it (never a passcode). */
export interface Grant {
  id: string;
  app_id: string;
  plane: "control" | "data";
  principal_kind: "user" | "group" | "token" | "anonymous";
  principal_id: string | null;
  role_id: string | null;
  passcode: boolean;
  created_at: string;
}

interface AppGrants {
  access: Grant[];
  management: Grant[];
}

interface Role {
  id: string;
  name: string;
  scope: string;
  builtin: boolean;
  verbs: string[];
}

interface PrincipalUser {
  id: string;
  username: string;
  display_name: string;
  email: string;
}

interface PrincipalGroup {
  id: string;
  name: string;
}

interface Matches {
  users: PrincipalUser[];
  groups: PrincipalGroup[];
}

interface TokenView {
  id: string;
  name: string;
}

/** Principal is who a new grant is for, as chosen on the page. */
interface Principal {
  kind: "user" | "group";
  id: string;
  label: string;
}

// The built-in app roles, offered when the installation's roles cannot be
// listed (GET /roles needs install.view).
const builtinRoles: Role[] = [
  { id: "role_owner", name: "owner", scope: "app", builtin: true, verbs: [] },
  { id: "role_developer", name: "developer", scope: "app", builtin: true, verbs: [] },
  { id: "role_viewer", name: "viewer", scope: "app", builtin: true, verbs: [] },
];

function userLabel(u: PrincipalUser): string {
  return u.display_name && u.display_name !== u.username ? u.display_name + " (" + u.username + ")" : u.username;
}

export function Sharing(props: AppPageProps) {
  const { appID } = props;
  const base = "/apps/" + seg(appID);
  const [grants, setGrants] = useState<AppGrants | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [roles, setRoles] = useState<Role[]>(builtinRoles);
  // null until known: whether the installation's roles could be listed.
  const [rolesListed, setRolesListed] = useState<boolean | null>(null);
  const [tokens, setTokens] = useState<TokenView[] | null>(null);
  const [names, setNames] = useState<Record<string, string>>({});
  const [removing, setRemoving] = useState<Grant | null>(null);
  const [status, setStatus] = useState("");
  // Whether the caller may share the app (app.grants.manage), as the API
  // answers the principal search: a refusal is shown instead of the form.
  const [shareRefused, setShareRefused] = useState<unknown>(null);

  const learn = useCallback((m: Matches) => {
    setNames((n) => {
      const out = { ...n };
      for (const u of m.users) out[u.id] = userLabel(u);
      for (const g of m.groups) out[g.id] = g.name;
      return out;
    });
  }, []);

  const load = useCallback(async () => {
    try {
      setGrants(await call<AppGrants>("GET", base + "/grants"));
      setError(null);
    } catch (e) {
      setError(e);
    }
  }, [base]);
  useEffect(() => {
    setGrants(null);
    load();
    // What names the page can learn: whom it may share with (the first of
    // each kind), the app roles, the service tokens. Each is optional: a
    // refusal leaves IDs shown as IDs and the built-in roles offered.
    setShareRefused(null);
    // The caller is named as such (a viewer cannot look names up).
    call<{ user: { id: string; username: string } | null }>("GET", "/me").then(
      (m) => m.user && setNames((n) => ({ ...n, [m.user!.id]: n[m.user!.id] ?? "You (" + m.user!.username + ")" })),
      () => undefined,
    );
    call<Matches>("GET", base + "/principals?q=").then(learn, (e) => {
      if (e instanceof ApiError && e.status === 403) setShareRefused(e);
    });
    all<Role>("/roles?scope=app").then(
      (rs) => {
        if (rs.length > 0) setRoles(rs);
        setRolesListed(true);
      },
      () => setRolesListed(false),
    );
    all<TokenView>("/tokens/service").then(setTokens, () => setTokens(null));
  }, [load]);

  const nameOf = (g: Grant): string => {
    if (g.principal_kind === "anonymous") return "Everyone";
    const id = g.principal_id ?? "";
    if (g.principal_kind === "token") return tokens?.find((t) => t.id === id)?.name ?? id;
    return names[id] ?? id;
  };
  const roleName = (id: string | null) => (id ? roles.find((r) => r.id === id)?.name ?? id : "—");

  const act = async (what: () => Promise<unknown>, done: string) => {
    setError(null);
    setStatus("");
    try {
      await what();
      setStatus(done);
      await load();
    } catch (e) {
      setError(e);
    }
  };

  const changeRole = (g: Grant, roleID: string) =>
    act(() => call("PATCH", base + "/grants/" + seg(g.id), { role_id: roleID }), nameOf(g) + " now administers the app as " + roleName(roleID) + ".");
  const remove = (g: Grant) => {
    setRemoving(null);
    act(() => call("DELETE", base + "/grants/" + seg(g.id)), nameOf(g) + " no longer " + (g.plane === "data" ? "opens" : "administers") + " the app.");
  };

  const removeButton = (g: Grant) =>
    !shareRefused && (
    <button type="button" class="small" onClick={() => setRemoving(g)} aria-label={"Remove " + nameOf(g) + (g.plane === "data" ? "'s access" : "'s role")}>
      Remove
    </button>
  );

  const everyone = grants?.access.find((g) => g.principal_kind === "anonymous") ?? null;

  return (
    <div class="sharing">
      {shareRefused ? (
        <section class="block panel share" aria-labelledby="share-h">
          <h2 id="share-h">Share the app</h2>
          <p>You can see who has this app, but not share it or change its grants: that needs app.grants.manage on it.</p>
          <ErrorNote error={shareRefused} />
        </section>
      ) : (
        <ShareForm
          appID={appID}
          roles={roles}
          rolesListed={rolesListed}
          tokens={tokens}
          hasEveryone={!!everyone}
          onFound={learn}
          onShared={async (msg) => {
            setStatus(msg);
            await load();
          }}
        />
      )}
      <ErrorNote error={error} />
      <p class="status" role="status" aria-live="polite">
        {status}
      </p>

      <section class="block" aria-labelledby="access-h">
        <h2 id="access-h">Who can open the app</h2>
        <Listed items={grants?.access ?? null} reading="Reading who can open it…" empty="Only those who administer the app can open it. Share it above with a person, a group, a service token, or everyone.">
          {(access) => (
            <ListTable name="access" caption="Who can open the app" columns={["Who", "Kind", "Passcode", "Since", ""]}>
              {access.map((g) => (
                <tr key={g.id} data-grant={g.id} data-principal={g.principal_id ?? "anonymous"}>
                  <th scope="row">{nameOf(g)}</th>
                  <td>{kindLabel(g.principal_kind)}</td>
                  <td>{g.principal_kind === "anonymous" ? g.passcode ? <span class="pill pill-ok">asked</span> : <span class="pill pill-busy">none: anyone with the address</span> : "—"}</td>
                  <td>{when(g.created_at)}</td>
                  <td class="row-actions">{removeButton(g)}</td>
                </tr>
              ))}
            </ListTable>
          )}
        </Listed>
        {everyone && !shareRefused && <PasscodeEditor key={everyone.id + String(everyone.passcode)} grant={everyone} base={base} onChanged={async (msg) => (setStatus(msg), await load())} />}
      </section>

      <section class="block" aria-labelledby="management-h">
        <h2 id="management-h">Who administers it</h2>
        <Listed
          items={grants?.management ?? null}
          reading="Reading who administers it…"
          empty="Nobody holds a role on this app; installation administrators manage it. Share it above with “Administer it” to give someone a role."
        >
          {(management) => (
            <ListTable name="management" caption="Who administers the app, and with which role" columns={["Who", "Kind", "Role", "Since", ""]}>
              {management.map((g) => (
                <tr key={g.id} data-grant={g.id} data-principal={g.principal_id ?? ""}>
                  <th scope="row">{nameOf(g)}</th>
                  <td>{kindLabel(g.principal_kind)}</td>
                  <td>
                    <label class="visually-hidden" for={"role-" + g.id}>
                      Role of {nameOf(g)}
                    </label>
                    <select id={"role-" + g.id} name="grant_role" value={g.role_id ?? ""} disabled={!!shareRefused} onChange={(e) => changeRole(g, (e.currentTarget as HTMLSelectElement).value)}>
                      {roleOptions(roles, g.role_id)}
                    </select>
                  </td>
                  <td>{when(g.created_at)}</td>
                  <td class="row-actions">{removeButton(g)}</td>
                </tr>
              ))}
            </ListTable>
          )}
        </Listed>
      </section>

      {removing && (
        <Confirm
          title={removing.plane === "data" ? "Stop sharing with " + nameOf(removing) + "?" : "Remove " + nameOf(removing) + "'s role?"}
          action="Remove"
          danger
          onConfirm={() => remove(removing)}
          onCancel={() => setRemoving(null)}
        >
          <p>
            {removing.principal_kind === "anonymous"
              ? "Everyone loses access, and everyone admitted by the passcode is asked to sign in again."
              : removing.plane === "data"
                ? nameOf(removing) + " can no longer open the app, and its tile leaves their launcher."
                : nameOf(removing) + " can no longer administer the app. The API keeps at least one person able to manage its sharing."}
          </p>
        </Confirm>
      )}
    </div>
  );
}

function kindLabel(k: string): string {
  return k === "anonymous" ? "everyone" : k === "token" ? "service token" : k;
}

function roleOptions(roles: Role[], current: string | null) {
  const list = current && !roles.some((r) => r.id === current) ? [...roles, { id: current, name: current, scope: "app", builtin: false, verbs: [] }] : roles;
  return list.map((r) => (
    <option key={r.id} value={r.id}>
      {r.name}
      {r.builtin ? "" : " (custom)"}
    </option>
  ));
}

/** PasscodeEditor sets, changes or removes the grant to everyone's passcode. */
function PasscodeEditor(props: { grant: Grant; base: string; onChanged: (msg: string) => Promise<void> }) {
  const { grant } = props;
  const [passcode, setPasscode] = useState("");
  const [asking, setAsking] = useState(false);
  const path = props.base + "/grants/" + seg(grant.id);
  const form = useSubmit(async () => {
    try {
      await call("PATCH", path, { passcode });
    } finally {
      setPasscode("");
    }
    await props.onChanged(grant.passcode ? "The passcode changed: everyone admitted before is asked for the new one." : "Everyone is now asked for the passcode.");
  });
  const removeIt = async () => {
    setAsking(false);
    form.setError(null);
    try {
      await call("PATCH", path, { passcode: "" });
      await props.onChanged("The passcode is removed: anyone with the address opens the app.");
    } catch (e) {
      form.setError(e);
    }
  };
  return (
    <div class="panel passcode-editor">
      <form class="inline-form" onSubmit={form.onSubmit} aria-describedby="passcode-error">
        <label for="everyone-passcode">{grant.passcode ? "New passcode for everyone" : "Passcode for everyone"}</label>
        <input id="everyone-passcode" name="everyone_passcode" type="password" autocomplete="new-password" required minLength={6} maxLength={128} value={passcode} onInput={(e) => setPasscode((e.currentTarget as HTMLInputElement).value)} />
        <Submit busy={form.busy}>{grant.passcode ? "Change passcode" : "Set passcode"}</Submit>
        {grant.passcode && (
          <button type="button" onClick={() => setAsking(true)}>
            Remove passcode
          </button>
        )}
      </form>
      <p class="hint">6 to 128 characters. Tell it to those you share the app with; this page never shows it.</p>
      <ErrorNote error={form.error} id="passcode-error" />
      {asking && (
        <Confirm title="Remove the passcode?" action="Remove passcode" danger onConfirm={removeIt} onCancel={() => setAsking(false)}>
          <p>Anyone who has the app’s address can then open it without a passcode.</p>
        </Confirm>
      )}
    </div>
  );
}

type With = "principal" | "token" | "everyone";

/** ShareForm makes one grant. */
function ShareForm(props: {
  appID: string;
  roles: Role[];
  rolesListed: boolean | null;
  tokens: TokenView[] | null;
  hasEveryone: boolean;
  onFound: (m: Matches) => void;
  onShared: (msg: string) => Promise<void>;
}) {
  const base = "/apps/" + seg(props.appID);
  const [withWhom, setWith] = useState<With>("principal");
  const [principal, setPrincipal] = useState<Principal | null>(null);
  const [tokenID, setTokenID] = useState("");
  const [plane, setPlane] = useState<"data" | "control">("data");
  const [roleID, setRoleID] = useState("role_viewer");
  const [askPasscode, setAskPasscode] = useState(true);
  const [passcode, setPasscode] = useState("");
  const [resetKey, setResetKey] = useState(0);

  const form = useSubmit(async () => {
    const body: Record<string, unknown> = {};
    let who = "";
    if (withWhom === "everyone") {
      body.plane = "data";
      body.principal_kind = "anonymous";
      if (askPasscode) body.passcode = passcode;
      who = "everyone" + (askPasscode ? " behind the passcode" : "");
    } else {
      body.plane = plane;
      if (withWhom === "token") {
        body.principal_kind = "token";
        body.principal_id = tokenID.trim();
        who = props.tokens?.find((t) => t.id === tokenID.trim())?.name ?? tokenID.trim();
      } else {
        if (!principal) throw new Error("Choose a person or a group: type part of a name and pick one of the matches.");
        body.principal_kind = principal.kind;
        body.principal_id = principal.id;
        who = principal.label;
      }
      if (plane === "control") body.role_id = roleID;
    }
    try {
      await call("POST", base + "/grants", body);
    } finally {
      setPasscode("");
    }
    setPrincipal(null);
    setTokenID("");
    setWith("principal");
    setResetKey((k) => k + 1);
    await props.onShared("Shared with " + who + ".");
  });

  const everyone = withWhom === "everyone";
  return (
    <section class="block panel share" aria-labelledby="share-h">
      <h2 id="share-h">Share the app</h2>
      <form onSubmit={form.onSubmit} aria-describedby="share-error">
        <fieldset class="choice">
          <legend>With</legend>
          <label>
            <input type="radio" name="share_with" value="principal" checked={withWhom === "principal"} onChange={() => setWith("principal")} /> A person or a group
          </label>
          <label>
            <input type="radio" name="share_with" value="token" checked={withWhom === "token"} onChange={() => setWith("token")} /> A service token
          </label>
          <label>
            <input type="radio" name="share_with" value="everyone" checked={everyone} onChange={() => setWith("everyone")} disabled={props.hasEveryone} /> Everyone
            {props.hasEveryone && <span class="muted small"> (already shared; change its passcode below)</span>}
          </label>
        </fieldset>

        <div class="share-who">
          {withWhom === "principal" && <PrincipalSearch key={resetKey} appID={props.appID} value={principal} onChoose={setPrincipal} onFound={props.onFound} />}
          {withWhom === "token" &&
            (props.tokens && props.tokens.length > 0 ? (
              <div class="field">
                <label for="share-token">Service token</label>
                <select id="share-token" name="share_token" required value={tokenID} onChange={(e) => setTokenID((e.currentTarget as HTMLSelectElement).value)}>
                  <option value="">Choose a token…</option>
                  {props.tokens.map((t) => (
                    <option key={t.id} value={t.id}>
                      {t.name} ({t.id})
                    </option>
                  ))}
                </select>
              </div>
            ) : (
              <div class="field">
                <label for="share-token">Service token ID</label>
                <input id="share-token" name="share_token" required autocomplete="off" spellcheck={false} value={tokenID} onInput={(e) => setTokenID((e.currentTarget as HTMLInputElement).value)} aria-describedby="share-token-hint" />
                <p class="hint" id="share-token-hint">
                  {props.tokens ? "There are no service tokens yet: an administrator makes them on the Tokens page." : "The token’s ID (tok_…), as its administrator gave it to you."}
                </p>
              </div>
            ))}
          {everyone && (
            <div class="field">
              <label class="check">
                <input type="checkbox" name="share_ask_passcode" checked={askPasscode} onChange={(e) => setAskPasscode((e.currentTarget as HTMLInputElement).checked)} /> Ask for a passcode
              </label>
              {askPasscode ? (
                <>
                  <label for="share-passcode">Passcode</label>
                  <input id="share-passcode" name="share_passcode" type="password" autocomplete="new-password" required minLength={6} maxLength={128} value={passcode} onInput={(e) => setPasscode((e.currentTarget as HTMLInputElement).value)} aria-describedby="share-passcode-hint" />
                  <p class="hint" id="share-passcode-hint">
                    6 to 128 characters. Whoever has the app’s address and the passcode opens it.
                  </p>
                </>
              ) : (
                <p class="hint">Without a passcode, anyone who has the app’s address opens it. Host policy may forbid this.</p>
              )}
            </div>
          )}
        </div>

        {!everyone && (
          <fieldset class="choice">
            <legend>They may</legend>
            <label>
              <input type="radio" name="share_plane" value="data" checked={plane === "data"} onChange={() => setPlane("data")} /> Open the app
            </label>
            <label>
              <input type="radio" name="share_plane" value="control" checked={plane === "control"} onChange={() => setPlane("control")} /> Administer it, as
            </label>
            <label class="visually-hidden" for="share-role">
              Role
            </label>
            <select id="share-role" name="share_role" value={roleID} disabled={plane !== "control"} onChange={(e) => setRoleID((e.currentTarget as HTMLSelectElement).value)}>
              {roleOptions(props.roles, null)}
            </select>
            {props.rolesListed === false && <span class="hint">The built-in app roles (listing custom roles needs install.view).</span>}
          </fieldset>
        )}
        <ErrorNote error={form.error} id="share-error" />
        <Submit busy={form.busy}>Share</Submit>
      </form>
    </section>
  );
}

/**
 * PrincipalSearch is a combobox (ARIA 1.2, list autocomplete): typing
 * searches users and groups (GET …/principals?q=, 250 ms after the last
 * key); Down and Up move through the matches, Enter chooses, Escape closes.
 */
function PrincipalSearch(props: { appID: string; value: Principal | null; onChoose: (p: Principal | null) => void; onFound: (m: Matches) => void }) {
  const [q, setQ] = useState(props.value?.label ?? "");
  const [options, setOptions] = useState<Principal[]>([]);
  const [open, setOpen] = useState(false);
  const [active, setActive] = useState(-1);
  const [searching, setSearching] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const seq = useRef(0);

  useEffect(() => {
    const query = q.trim();
    if (props.value && q === props.value.label) return;
    if (query === "") {
      setOptions([]);
      setOpen(false);
      return;
    }
    const n = ++seq.current;
    setSearching(true);
    const timer = window.setTimeout(async () => {
      try {
        const m = await call<Matches>("GET", "/apps/" + seg(props.appID) + "/principals?q=" + encodeURIComponent(query));
        if (n !== seq.current) return;
        props.onFound(m);
        setOptions([...m.users.map((u) => ({ kind: "user" as const, id: u.id, label: userLabel(u) })), ...m.groups.map((g) => ({ kind: "group" as const, id: g.id, label: g.name }))]);
        setActive(-1);
        setOpen(true);
        setError(null);
      } catch (e) {
        if (n === seq.current) setError(e);
      } finally {
        if (n === seq.current) setSearching(false);
      }
    }, 250);
    return () => clearTimeout(timer);
  }, [q]);

  const choose = (p: Principal) => {
    props.onChoose(p);
    setQ(p.label);
    setOpen(false);
    setActive(-1);
  };
  const onKeyDown = (e: KeyboardEvent) => {
    if (e.key === "ArrowDown") {
      e.preventDefault();
      if (!open && options.length > 0) setOpen(true);
      setActive((a) => (options.length === 0 ? -1 : (a + 1) % options.length));
    } else if (e.key === "ArrowUp") {
      e.preventDefault();
      setActive((a) => (options.length === 0 ? -1 : a <= 0 ? options.length - 1 : a - 1));
    } else if (e.key === "Enter" && open && active >= 0 && options[active]) {
      e.preventDefault();
      choose(options[active]);
    } else if (e.key === "Escape" && open) {
      e.preventDefault();
      setOpen(false);
      setActive(-1);
    }
  };
  const optID = (i: number) => "principal-opt-" + i;
  const expanded = open && q.trim() !== "";
  return (
    <div class="field combobox">
      <label for="share-principal" id="share-principal-label">
        Person or group
      </label>
      <input
        id="share-principal"
        name="share_principal"
        type="text"
        role="combobox"
        autocomplete="off"
        spellcheck={false}
        aria-autocomplete="list"
        aria-expanded={expanded}
        aria-controls="principal-options"
        aria-activedescendant={expanded && active >= 0 ? optID(active) : undefined}
        aria-describedby="share-principal-hint"
        value={q}
        onInput={(e) => {
          setQ((e.currentTarget as HTMLInputElement).value);
          if (props.value) props.onChoose(null);
        }}
        onKeyDown={onKeyDown}
        onBlur={() => window.setTimeout(() => setOpen(false), 150)}
      />
      <p class="hint" id="share-principal-hint">
        {props.value ? "Chosen: " + props.value.label + " (" + props.value.kind + ")." : searching ? "Searching…" : "Type part of a username, a name, an email or a group’s name; pick with the arrow keys and Enter."}
      </p>
      <ul id="principal-options" role="listbox" aria-labelledby="share-principal-label" class={"options" + (expanded ? " open" : "")} hidden={!expanded}>
        {options.length === 0 ? (
          <li class="option-none" role="option" aria-disabled="true" aria-selected="false">
            Nobody matches “{q.trim()}”.
          </li>
        ) : (
          options.map((o, i) => (
            <li
              key={o.kind + o.id}
              id={optID(i)}
              role="option"
              aria-selected={i === active}
              class={i === active ? "active" : ""}
              data-principal={o.id}
              onMouseDown={(e) => {
                e.preventDefault();
                choose(o);
              }}
            >
              <span class="opt-label">{o.label}</span> <span class="muted small">{o.kind}</span>
            </li>
          ))
        )}
      </ul>
      <ErrorNote error={error} />
    </div>
  );
}
