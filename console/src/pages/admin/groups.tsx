import { useCallback, useEffect, useMemo, useState } from "preact/hooks";
import { all, call, seg } from "../../api";
import { Link, navigate } from "../../router";
import { ErrorNote, ListTable, Notice, Submit, useSubmit, when } from "../../ui";
import type { AdminPageProps } from "../admin";
import { AppAccessList, can, roleName, RoleForm, useConfirmed, useInstallRoles, type Account, type Group, type Role } from "./people";

// Groups, /admin/groups[/<group ID>]: the groups (GET /api/v1/groups), a
// new one (POST), and the group the address names: its members (add one
// found among the accounts, PUT …/members/{userID}; remove one, DELETE),
// its installation role (PUT or DELETE …/role), the apps shared with it
// (GET …/apps), delete. Reading needs install.view, changing
// install.users.manage; the API refuses what would leave nobody able to
// manage accounts, and the page shows it.

export function Groups(props: AdminPageProps) {
  const manage = can(props.me, "install.users.manage");
  const selected = props.rest[0] ?? "";
  const [groups, setGroups] = useState<Group[] | null>(null);
  const [users, setUsers] = useState<Account[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [name, setName] = useState("");
  const { roles, error: rolesError } = useInstallRoles();
  const load = useCallback(async () => {
    try {
      const [gs, us] = await Promise.all([all<Group>("/groups"), all<Account>("/users")]);
      setGroups(gs);
      setUsers(us);
      setError(null);
    } catch (e) {
      setError(e);
      setGroups([]);
    }
  }, []);
  useEffect(() => {
    load();
  }, [load]);
  const create = useSubmit(async () => {
    const got = await call<{ group: Group }>("POST", "/groups", { name: name.trim() });
    setName("");
    setGroups((gs) => [...(gs ?? []), got.group]);
    navigate("/admin/groups/" + got.group.id);
  });
  const changed = (g: Group | null, id: string) => setGroups((gs) => (gs ?? []).flatMap((x) => (x.id !== id ? [x] : g ? [g] : [])));
  const group = groups?.find((g) => g.id === selected);

  return (
    <section class="groups">
      <h1>Groups</h1>
      <p class="lead">Share apps with many people at once (on each app’s Sharing page), and give every member an installation role.</p>
      {manage ? (
        <form class="inline-form panel" onSubmit={create.onSubmit} aria-describedby="group-new-error">
          <label for="group-name">New group</label>
          <input id="group-name" name="group_name" required maxLength={100} value={name} onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)} />
          <Submit busy={create.busy}>Create group</Submit>
          <ErrorNote error={create.error} id="group-new-error" />
        </form>
      ) : (
        can(props.me, "install.view") && <Notice>You may look at groups; changing them needs install.users.manage, which you do not hold.</Notice>
      )}
      <ErrorNote error={error ?? rolesError} />
      {selected && groups !== null && !error && (
        group ? (
          <GroupDetail key={selected} group={group} users={users ?? []} roles={roles} manage={manage} onChanged={changed} reload={load} />
        ) : (
          <ErrorNote error={new Error("There is no group " + selected + ".")} />
        )
      )}
      <section class="block" aria-labelledby="groups-h" hidden={!!error}>
        <h2 id="groups-h">All groups</h2>
        {groups !== null && groups.length === 0 && !error ? (
          <div class="empty-state small">
            <p>No groups yet. {manage ? "Create one above, then add its members." : ""}</p>
          </div>
        ) : (
          <ListTable
            fixed
            name="groups"
            caption="Groups"
            columns={["Name", "Members", "Installation role", "From", "Created"]}
            rows={
              groups &&
              groups.map((g) => (
                <tr key={g.id} data-group={g.id} class={g.id === selected ? "selected" : ""}>
                  <th scope="row">
                    <Link href={"/admin/groups/" + g.id} aria-current={g.id === selected ? "true" : undefined}>
                      {g.name}
                    </Link>
                  </th>
                  <td>{g.member_ids?.length ?? 0}</td>
                  <td>{roleName(roles, g.role_id)}</td>
                  <td>{g.source === "local" ? "this installation" : g.source}</td>
                  <td>{when(g.created_at)}</td>
                </tr>
              ))
            }
          />
        )}
      </section>
    </section>
  );
}

function GroupDetail(props: { group: Group; users: Account[]; roles: Role[] | null; manage: boolean; onChanged: (g: Group | null, id: string) => void; reload: () => Promise<void> }) {
  const g = props.group;
  const path = "/groups/" + seg(g.id);
  const [q, setQ] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [note, setNote] = useState("");
  const confirmed = useConfirmed();
  const byID = useMemo(() => new Map(props.users.map((u) => [u.id, u])), [props.users]);
  const members = g.member_ids ?? [];
  const candidates = useMemo(() => {
    const s = q.trim().toLowerCase();
    if (s === "") return [];
    return props.users
      .filter((u) => !members.includes(u.id) && [u.username, u.display_name, u.email].some((f) => f && f.toLowerCase().includes(s)))
      .slice(0, 8);
  }, [q, props.users, members]);
  const change = async (method: string, p: string, body?: unknown) => {
    const got = await call<{ group: Group }>(method, p, body);
    props.onChanged(got.group, g.id);
  };
  const add = async (u: Account) => {
    setError(null);
    try {
      await change("PUT", path + "/members/" + seg(u.id));
      setQ("");
      setNote(u.username + " is a member now.");
    } catch (e) {
      setError(e);
    }
  };
  const remove = (id: string) => {
    const who = byID.get(id)?.username ?? id;
    confirmed.ask({
      title: "Remove " + who + " from " + g.name + "?",
      action: "Remove " + who,
      body: "They lose what the group gives them (its role, the apps shared with it) unless they have it another way.",
      run: async () => {
        await change("DELETE", path + "/members/" + seg(id));
        setNote(who + " is no longer a member.");
      },
    });
  };
  const del = () =>
    confirmed.ask({
      title: "Delete the group " + g.name + "?",
      action: "Delete " + g.name,
      body: "The group and everything shared with it are deleted; its members keep what they have another way. This cannot be undone.",
      run: async () => {
        await call("DELETE", path);
        props.onChanged(null, g.id);
        navigate("/admin/groups");
      },
    });

  return (
    <section class="block panel detail" aria-labelledby="group-h" data-group-detail={g.id}>
      <h2 id="group-h">{g.name}</h2>
      <dl class="facts">
        <dt>ID</dt>
        <dd>
          <code>{g.id}</code>
        </dd>
        <dt>Installation role</dt>
        <dd>{roleName(props.roles, g.role_id)}</dd>
      </dl>
      <ErrorNote error={error ?? confirmed.error} />
      <p class="status" role="status" aria-live="polite">
        {note}
      </p>
      {confirmed.dialog}
      {props.manage && <RoleForm path={path} current={g.role_id} roles={props.roles} idPrefix="group" onDone={async () => (await props.reload(), setNote("Saved."))} />}
      <h3 id="members-h">Members</h3>
      {members.length === 0 ? (
        <p class="muted">No members yet.{props.manage ? " Find an account below to add it." : ""}</p>
      ) : (
        <ul class="members" aria-labelledby="members-h">
          {members.map((id) => {
            const u = byID.get(id);
            return (
              <li key={id} data-member={id}>
                <span>
                  {u ? (
                    <>
                      <Link href={"/admin/accounts/" + id}>{u.display_name || u.username}</Link> <span class="muted">{u.username}</span>
                    </>
                  ) : (
                    <code>{id}</code>
                  )}
                </span>
                {props.manage && (
                  <button type="button" class="small" onClick={() => remove(id)} aria-label={"Remove " + (u?.username ?? id)}>
                    Remove
                  </button>
                )}
              </li>
            );
          })}
        </ul>
      )}
      {props.manage && (
        <div class="add-member" role="search">
          <label for="member-find">Add a member</label>
          <input id="member-find" name="member_find" type="search" value={q} placeholder="username, name or email" onInput={(e) => setQ((e.currentTarget as HTMLInputElement).value)} aria-describedby="member-find-hint" />
          <p class="hint" id="member-find-hint" role="status" aria-live="polite">
            {q.trim() === "" ? "Type part of an account’s username, name or email." : candidates.length === 0 ? "No account that is not a member matches." : candidates.length + " matching"}
          </p>
          {candidates.length > 0 && (
            <ul class="candidates">
              {candidates.map((u) => (
                <li key={u.id} data-candidate={u.id}>
                  <span>
                    {u.display_name || u.username} <span class="muted">{u.username}</span>
                    {u.email && <span class="muted"> · {u.email}</span>}
                  </span>
                  <button type="button" class="small" onClick={() => add(u)} aria-label={"Add " + u.username}>
                    Add
                  </button>
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
      <AppAccessList path={path + "/apps"} title="Apps shared with the group" empty="None you can see. Share an app with the group on the app’s Sharing page." />
      {props.manage && (
        <div class="actions danger-zone">
          <button type="button" class="danger" onClick={del}>
            Delete group
          </button>
        </div>
      )}
    </section>
  );
}
