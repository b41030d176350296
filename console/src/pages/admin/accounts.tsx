import { useCallback, useEffect, useMemo, useState } from "preact/hooks";
import { call, seg, type Page } from "../../api";
import { Link, navigate } from "../../router";
import { ErrorNote, Field, ListTable, Notice, SecretOnce, Submit, useSubmit, when } from "../../ui";
import type { AdminPageProps } from "../admin";
import { AppAccessList, can, roleName, RoleForm, useConfirmed, useInstallRoles, type Account, type Role } from "./people";

// Accounts, /admin/accounts[/<user ID>]: the accounts, a page at a time
// (GET /api/v1/users, limit and cursor), filtered among those read (the
// API has no search of accounts); a new account (POST /api/v1/users, its
// generated password shown once); and the account the address names: its
// installation role (PUT or DELETE …/role), name and email (PATCH), a new
// password (POST …/password, ending its sessions), suspend or reactivate
// (PATCH status), delete. Reading needs install.view, changing
// install.users.manage; the API's refusals (the last administrator) show
// as they come.

const pageSize = 50;

export function Accounts(props: AdminPageProps) {
  const manage = can(props.me, "install.users.manage");
  const selected = props.rest[0] ?? "";
  const [items, setItems] = useState<Account[] | null>(null);
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  // refused: the API refused the list itself (PERM_VERB_REQUIRED); the page is its refusal.
  const [refused, setRefused] = useState(false);
  const [busy, setBusy] = useState(false);
  const [filter, setFilter] = useState("");
  const [status, setStatus] = useState("all");
  const [created, setCreated] = useState<{ user: Account; password?: string } | null>(null);
  const { roles, error: rolesError } = useInstallRoles();

  const loadFirst = useCallback(async () => {
    try {
      const page = await call<Page<Account>>("GET", "/users?limit=" + pageSize);
      setItems(page.items);
      setCursor(page.next_cursor);
      setError(null);
    } catch (e) {
      setError(e);
      setRefused(true);
      setItems([]);
    }
  }, []);
  useEffect(() => {
    loadFirst();
  }, [loadFirst]);
  const more = async () => {
    if (!cursor) return;
    setBusy(true);
    try {
      const page = await call<Page<Account>>("GET", "/users?limit=" + pageSize + "&cursor=" + seg(cursor));
      setItems((is) => [...(is ?? []), ...page.items]);
      setCursor(page.next_cursor);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  // One account changed: its row is replaced (or dropped) in place.
  const changed = (id: string, u: Account | null) => setItems((is) => (is ?? []).flatMap((x) => (x.id !== id ? [x] : u ? [u] : [])));

  const shown = useMemo(() => {
    const q = filter.trim().toLowerCase();
    return (items ?? []).filter(
      (u) => (status === "all" || u.status === status) && (q === "" || [u.username, u.display_name, u.email, u.id].some((f) => f && f.toLowerCase().includes(q))),
    );
  }, [items, filter, status]);

  return (
    <section class="accounts">
      <h1>Accounts</h1>
      <p class="lead">The people who sign in to this installation, their installation role and whether they may sign in.</p>
      {manage ? (
        <CreateAccount
          onCreated={async (c) => {
            setCreated(c);
            setItems((is) => [...(is ?? []), c.user]);
          }}
        />
      ) : (
        can(props.me, "install.view") && <Notice>You may look at accounts; creating and changing them needs install.users.manage, which you do not hold.</Notice>
      )}
      {created?.password && (
        <SecretOnce title={"The first password of " + created.user.username} value={created.password} name="new_password" onDone={() => setCreated(null)}>
          <p>Give it to them: they choose their own at their first sign-in.</p>
        </SecretOnce>
      )}
      {created && !created.password && (
        <Notice>
          The account {created.user.username} is created.{" "}
          <Link href={"/admin/accounts/" + created.user.id}>Give it a role</Link>.
        </Notice>
      )}
      <ErrorNote error={error ?? rolesError} />
      {selected && (
        <AccountDetail key={selected} id={selected} me={props.me.user?.id ?? ""} manage={manage} roles={roles} fromList={items?.find((u) => u.id === selected)} onChanged={changed} />
      )}
      <section class="block" aria-labelledby="accounts-h" hidden={refused}>
        <div class="list-head">
          <h2 id="accounts-h">All accounts</h2>
          <div class="filters" role="search">
            <label for="accounts-filter">Filter</label>
            <input id="accounts-filter" name="accounts_filter" type="search" value={filter} placeholder="name, email or ID" onInput={(e) => setFilter((e.currentTarget as HTMLInputElement).value)} aria-describedby="accounts-filter-hint" />
            <label for="accounts-status">Status</label>
            <select id="accounts-status" name="accounts_status" value={status} onChange={(e) => setStatus((e.currentTarget as HTMLSelectElement).value)}>
              <option value="all">Any</option>
              <option value="active">Active</option>
              <option value="suspended">Suspended</option>
            </select>
            <span id="accounts-filter-hint" class="hint">
              Among the {items?.length ?? 0} accounts read{cursor ? " so far" : ""}.
            </span>
          </div>
        </div>
        {items !== null && !error && shown.length === 0 ? (
          <div class="empty-state small">
            <p>{items.length === 0 ? "No accounts." : "No account read so far matches. Clear the filter" + (cursor ? ", or read more accounts below." : ".")}</p>
          </div>
        ) : (
          <ListTable
            fixed
            name="accounts"
            caption="Accounts"
            columns={["Username", "Name", "Email", "Status", "Installation role", "Created"]}
            rows={
              items &&
              shown.map((u) => (
                <tr key={u.id} data-user={u.id} data-username={u.username} class={u.id === selected ? "selected" : ""}>
                  <th scope="row">
                    <Link href={"/admin/accounts/" + u.id} aria-current={u.id === selected ? "true" : undefined}>
                      {u.username}
                    </Link>
                  </th>
                  <td>{u.display_name}</td>
                  <td>{u.email || <span class="muted">none</span>}</td>
                  <td>
                    <StatusPill user={u} />
                  </td>
                  <td>{roleName(roles, u.role_id)}</td>
                  <td>{when(u.created_at)}</td>
                </tr>
              ))
            }
          />
        )}
        {cursor && (
          <p>
            <button type="button" onClick={more} disabled={busy} aria-busy={busy}>
              Read more accounts
            </button>
          </p>
        )}
      </section>
    </section>
  );
}

function StatusPill(props: { user: Account }) {
  const u = props.user;
  return (
    <>
      <span class={"pill " + (u.status === "active" ? "pill-ok" : "pill-bad")}>{u.status}</span>
      {u.must_change_password && <span class="pill pill-busy tag">must change password</span>}
    </>
  );
}

/** CreateAccount is the form of a new account (POST /api/v1/users). */
function CreateAccount(props: { onCreated: (c: { user: Account; password?: string }) => Promise<void> }) {
  const [username, setUsername] = useState("");
  const [displayName, setDisplayName] = useState("");
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [mustChange, setMustChange] = useState(true);
  const form = useSubmit(async () => {
    const body: Record<string, unknown> = { username: username.trim(), display_name: displayName.trim() };
    if (email.trim()) body.email = email.trim();
    if (password) {
      body.password = password;
      body.must_change_password = mustChange;
    }
    const got = await call<{ user: Account; password?: string }>("POST", "/users", body);
    setUsername("");
    setDisplayName("");
    setEmail("");
    setPassword("");
    setMustChange(true);
    await props.onCreated(got);
  });
  return (
    <form class="panel create-form" onSubmit={form.onSubmit} aria-labelledby="account-new-h" aria-describedby="account-new-error">
      <h2 id="account-new-h">New account</h2>
      <div class="form-row">
        <Field label="Username" name="username" autocomplete="off" value={username} onInput={setUsername} />
        <Field label="Display name" name="display_name" autocomplete="off" value={displayName} onInput={setDisplayName} />
        <Field label="Email" name="email" type="email" autocomplete="off" required={false} value={email} onInput={setEmail} hint="Optional; no other account may have it." />
      </div>
      <div class="form-row">
        <Field
          label="First password"
          name="password"
          type="password"
          autocomplete="new-password"
          required={false}
          value={password}
          onInput={setPassword}
          hint="Leave empty to have one generated, shown once here; they must change it at their first sign-in."
        />
        <div class="check">
          <input id="account-must-change" name="must_change_password" type="checkbox" checked={password === "" || mustChange} disabled={password === ""} onChange={(e) => setMustChange((e.currentTarget as HTMLInputElement).checked)} />
          <label for="account-must-change">Must change it at first sign-in</label>
        </div>
      </div>
      <ErrorNote error={form.error} id="account-new-error" />
      <Submit busy={form.busy}>Create account</Submit>
    </form>
  );
}

/** AccountDetail is one account and what may be done to it. */
function AccountDetail(props: { id: string; me: string; manage: boolean; roles: Role[] | null; fromList?: Account; onChanged: (id: string, u: Account | null) => void }) {
  const path = "/users/" + seg(props.id);
  const [user, setUser] = useState<Account | null>(props.fromList ?? null);
  const [error, setError] = useState<unknown>(null);
  const [note, setNote] = useState("");
  const confirmed = useConfirmed();
  const reload = useCallback(async () => {
    try {
      const u = (await call<{ user: Account }>("GET", path)).user;
      setUser(u);
      props.onChanged(u.id, u);
    } catch (e) {
      setError(e);
    }
  }, [path]);
  useEffect(() => {
    reload();
  }, [reload]);

  const setStatus = (to: "active" | "suspended") => {
    const u = user!;
    confirmed.ask({
      title: (to === "suspended" ? "Suspend " : "Reactivate ") + u.username + "?",
      action: to === "suspended" ? "Suspend " + u.username : "Reactivate " + u.username,
      body:
        to === "suspended"
          ? "They are signed out everywhere and cannot sign in; their delegated tokens stop working (AUTH_TOKEN_ORPHANED). Nothing is deleted: reactivating gives it all back."
          : "They may sign in again, and their delegated tokens work again.",
      run: async () => {
        const got = (await call<{ user: Account }>("PATCH", path, { status: to })).user;
        setUser(got);
        props.onChanged(got.id, got);
        setNote(to === "suspended" ? "Suspended: their sessions have ended." : "Reactivated.");
      },
    });
  };
  const remove = () => {
    const u = user!;
    confirmed.ask({
      title: "Delete " + u.username + "?",
      action: "Delete " + u.username,
      body: "The account, its sessions, its delegated tokens, its group memberships and everything shared with it are deleted. This cannot be undone; suspending keeps them.",
      run: async () => {
        await call("DELETE", path);
        props.onChanged(u.id, null);
        navigate("/admin/accounts");
      },
    });
  };

  const u = user;
  const self = u?.id === props.me;
  return (
    <section class="block panel detail" aria-labelledby="account-h" data-account={props.id}>
      <h2 id="account-h">
        {u ? (
          <>
            {u.display_name || u.username} <span class="muted">({u.username})</span> <StatusPill user={u} />
          </>
        ) : (
          <code>{props.id}</code>
        )}
      </h2>
      <dl class="facts">
        <dt>ID</dt>
        <dd>
          <code>{props.id}</code>
        </dd>
        <dt>Email</dt>
        <dd>{u ? u.email ? u.email + (u.email_verified ? " (verified)" : " (not verified)") : "none" : "…"}</dd>
        <dt>Installation role</dt>
        <dd>{u ? roleName(props.roles, u.role_id) : "…"}</dd>
        <dt>From</dt>
        <dd>{u ? (u.source === "local" ? "this installation" : u.source) : "…"}</dd>
        <dt>Created</dt>
        <dd>{u ? when(u.created_at) : "…"}</dd>
      </dl>
      <ErrorNote error={error ?? confirmed.error} />
      <p class="status" role="status" aria-live="polite">
        {note}
      </p>
      {confirmed.dialog}
      <AppAccessList path={path + "/apps"} title="Apps" empty="No app you can see is shared with this account, directly or through a group." />
      {u && props.manage && (
        <>
          <RoleForm path={path} current={u.role_id} roles={props.roles} idPrefix="account" onDone={reload} />
          <EditAccount path={path} user={u} onDone={(got) => (setUser(got), props.onChanged(got.id, got), setNote("Saved."))} />
          {u.source === "local" && !self && <ResetPassword path={path} user={u} onDone={reload} />}
          {self && (
            <p class="hint">
              Your own password is changed on <Link href="/account/password">your password page</Link>.
            </p>
          )}
          <div class="actions danger-zone">
            {u.status === "active" ? (
              <button type="button" onClick={() => setStatus("suspended")}>
                Suspend
              </button>
            ) : (
              <button type="button" onClick={() => setStatus("active")}>
                Reactivate
              </button>
            )}
            <button type="button" class="danger" onClick={remove}>
              Delete account
            </button>
          </div>
        </>
      )}
    </section>
  );
}

/** EditAccount changes an account's username, display name and email (PATCH). */
function EditAccount(props: { path: string; user: Account; onDone: (u: Account) => void }) {
  const u = props.user;
  const [username, setUsername] = useState(u.username);
  const [displayName, setDisplayName] = useState(u.display_name);
  const [email, setEmail] = useState(u.email);
  const form = useSubmit(async () => {
    const body: Record<string, string> = {};
    if (username.trim() !== u.username) body.username = username.trim();
    if (displayName.trim() !== u.display_name) body.display_name = displayName.trim();
    if (email.trim() !== u.email) body.email = email.trim();
    props.onDone((await call<{ user: Account }>("PATCH", props.path, body)).user);
  });
  return (
    <form class="sub-form" onSubmit={form.onSubmit} aria-labelledby="account-edit-h" aria-describedby="account-edit-error">
      <h3 id="account-edit-h">Name and email</h3>
      <div class="form-row">
        <Field label="Username" name="edit_username" autocomplete="off" value={username} onInput={setUsername} />
        <Field label="Display name" name="edit_display_name" autocomplete="off" value={displayName} onInput={setDisplayName} />
        <Field label="Email" name="edit_email" type="email" autocomplete="off" required={false} value={email} onInput={setEmail} />
      </div>
      <ErrorNote error={form.error} id="account-edit-error" />
      <Submit busy={form.busy}>Save</Submit>
    </form>
  );
}

/** ResetPassword gives a local account a new password (POST …/password), after a confirmation. */
function ResetPassword(props: { path: string; user: Account; onDone: () => Promise<void> }) {
  const [password, setPassword] = useState("");
  const [generated, setGenerated] = useState(false);
  const [mustChange, setMustChange] = useState(true);
  const [shown, setShown] = useState("");
  const confirmed = useConfirmed();
  const generate = useSubmit(async () => {
    const got = await call<{ password: string }>("POST", "/passwords/generate");
    setPassword(got.password);
    setGenerated(true);
  });
  const form = useSubmit(async () => {
    const pw = password;
    const wasGenerated = generated;
    confirmed.ask({
      title: "Reset the password of " + props.user.username + "?",
      action: "Reset password",
      body: "Their password changes and every session of theirs ends." + (mustChange ? " They must choose a new one at their next sign-in." : ""),
      run: async () => {
        await call("POST", props.path + "/password", { password: pw, must_change_password: mustChange });
        setPassword("");
        setGenerated(false);
        setShown(wasGenerated ? pw : "");
        await props.onDone();
      },
    });
  });
  return (
    <form class="sub-form" onSubmit={form.onSubmit} aria-labelledby="account-reset-h" aria-describedby="account-reset-error">
      <h3 id="account-reset-h">Reset password</h3>
      <div class="inline-form">
        <label for="reset-password">New password</label>
        <input
          id="reset-password"
          name="reset_password"
          type={generated ? "text" : "password"}
          autocomplete="new-password"
          required
          minLength={12}
          value={password}
          onInput={(e) => (setPassword((e.currentTarget as HTMLInputElement).value), setGenerated(false))}
        />
        <button type="button" onClick={generate.onSubmit} disabled={generate.busy}>
          Generate
        </button>
        <span class="check">
          <input id="reset-must-change" name="reset_must_change" type="checkbox" checked={mustChange} onChange={(e) => setMustChange((e.currentTarget as HTMLInputElement).checked)} />
          <label for="reset-must-change">Must change it at next sign-in</label>
        </span>
        <button type="submit" class="primary">
          Reset password
        </button>
      </div>
      <ErrorNote error={form.error ?? generate.error ?? confirmed.error} id="account-reset-error" />
      {confirmed.dialog}
      {shown && (
        <SecretOnce title={"The new password of " + props.user.username} value={shown} name="reset_secret" onDone={() => setShown("")}>
          <p>Their sessions have ended. Give it to them.</p>
        </SecretOnce>
      )}
    </form>
  );
}
