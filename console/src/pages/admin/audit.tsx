import { Fragment } from "preact";
import { useEffect, useState } from "preact/hooks";
import { all, call, type App, type User } from "../../api";
import { Link, navigate, useLocation } from "../../router";
import { ErrorNote, Notice, when } from "../../ui";
import type { AdminPageProps } from "../admin";
import { may } from "./host";
import "./host.css";

// The audit log, /admin/audit: GET /api/v1/audit, newest first, with every
// filter it takes (action — a prefix —, principal_id, principal_kind,
// app_id, target_kind, target_id, involving, since, until) and its page
// size (limit); "Older" pages with before= (the answer's next_before). The
// filters and the page are the page's address query, exactly the API's
// query, so a filtered view is a link and survives a reload. Each entry:
// when, who (named when the account is known), the action and its
// outcome, the target (the app linked), and its details, expandable.

interface Entry {
  id: string;
  time: string;
  action: string;
  principal_id: string;
  principal_kind: string;
  app_id: string | null;
  target_kind: string | null;
  target_id: string | null;
  request_id: string;
  details: Record<string, unknown> | null;
}

interface AuditPage {
  items: Entry[];
  next_before?: string;
}

/** The filters, in the API's order, with how the form asks for each. */
const filters: { name: string; label: string; hint: string; type?: "kind" | "time" }[] = [
  { name: "action", label: "Action", hint: "An action or its start: app.create, or app. for every app action." },
  { name: "principal_id", label: "Who (principal ID)", hint: "The user, token or system principal that acted." },
  { name: "principal_kind", label: "Kind of principal", hint: "", type: "kind" },
  { name: "app_id", label: "App ID", hint: "Entries about this app." },
  { name: "target_kind", label: "Target kind", hint: "app, user, token, adapter, policy, workload…" },
  { name: "target_id", label: "Target ID", hint: "Entries on this target." },
  { name: "involving", label: "Involving", hint: "Entries whose principal or target is this ID." },
  { name: "since", label: "From", hint: "From this time on (your local time).", type: "time" },
  { name: "until", label: "Until", hint: "Before this time (your local time).", type: "time" },
];
const params = [...filters.map((f) => f.name), "limit", "before"];
const kinds = ["user", "token", "system", "anonymous"];
const sizes = ["25", "50", "100", "200"];

/** query is the page's address query: only the API's parameters, in its order. */
function query(q: URLSearchParams): string {
  const out = new URLSearchParams();
  for (const p of params) {
    const v = q.get(p);
    if (v) out.set(p, v);
  }
  const s = out.toString();
  return s ? "?" + s : "";
}

/** with is the address of this page with one parameter set (or removed) and from the newest page. */
function with_(q: URLSearchParams, name: string, value: string | null): string {
  const n = new URLSearchParams(q);
  n.delete("before");
  if (value === null) n.delete(name);
  else n.set(name, value);
  return "/admin/audit" + query(n);
}

/** older is the address of the page of entries before the ID before. */
function older(q: URLSearchParams, before: string): string {
  const n = new URLSearchParams(q);
  n.set("before", before);
  return "/admin/audit" + query(n);
}

/** localInput is an RFC 3339 time as a datetime-local input's value (the reader's time zone). */
function localInput(iso: string): string {
  const d = new Date(iso);
  if (isNaN(d.getTime())) return "";
  const p = (n: number) => String(n).padStart(2, "0");
  return d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) + "T" + p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds());
}

/** rfc3339 is a datetime-local input's value as RFC 3339 in UTC, to the second. */
function rfc3339(local: string): string {
  const d = new Date(local);
  return isNaN(d.getTime()) ? "" : d.toISOString().replace(/\.\d{3}Z$/, "Z");
}

export function Audit(props: AdminPageProps) {
  const { search } = useLocation();
  const q = new URLSearchParams(search);
  const apiQuery = query(q);
  // Each answer is kept with the query it answers: until the address's
  // query is answered, the page shows placeholders, never another query's
  // entries.
  const [answer, setAnswer] = useState<{ q: string; page: AuditPage | null; error: unknown } | null>(null);
  const page = answer?.q === apiQuery ? answer.page : null;
  const error = answer?.q === apiQuery ? answer.error : null;
  const [names, setNames] = useState<Record<string, string>>({});
  const [form, setForm] = useState<Record<string, string>>({});

  // The form follows the address (a link followed, back and forward).
  useEffect(() => {
    const f: Record<string, string> = {};
    for (const x of filters) f[x.name] = x.type === "time" ? localInput(q.get(x.name) ?? "") : q.get(x.name) ?? "";
    f.limit = q.get("limit") ?? "50";
    setForm(f);
  }, [apiQuery]);

  useEffect(() => {
    let live = true;
    call<AuditPage>("GET", "/audit" + apiQuery)
      .then((p) => live && setAnswer({ q: apiQuery, page: p, error: null }))
      .catch((e) => live && setAnswer({ q: apiQuery, page: null, error: e }));
    return () => {
      live = false;
    };
  }, [apiQuery]);

  // Names of accounts and apps, so that entries read as who and what.
  useEffect(() => {
    const n: Record<string, string> = {};
    Promise.all([
      all<User>("/users")
        .then((us) => us.forEach((u) => (n[u.id] = u.display_name || u.username)))
        .catch(() => {}),
      all<App>("/apps")
        .then((as) => as.forEach((a) => (n[a.id] = a.name)))
        .catch(() => {}),
    ]).then(() => setNames(n));
  }, []);

  const apply = (e: Event) => {
    e.preventDefault();
    const n = new URLSearchParams();
    for (const f of filters) {
      const v = (form[f.name] ?? "").trim();
      if (v) n.set(f.name, f.type === "time" ? rfc3339(v) || v : v);
    }
    if (form.limit && form.limit !== "50") n.set("limit", form.limit);
    navigate("/admin/audit" + query(n));
  };
  const active = filters.filter((f) => q.get(f.name));
  const set = (name: string, v: string) => setForm((f) => ({ ...f, [name]: v }));

  return (
    <div class="host audit">
      <h1>Audit log</h1>
      <p class="lead">Every change made on this installation, and every secret read, newest first. Filter it below; the address keeps the filters, so a filtered view can be shared as a link.</p>
      {!may(props.me, "install.audit.read") && <Notice>Reading the audit log needs the verb install.audit.read; the API’s answer is shown below.</Notice>}
      <form class="panel audit-filters" onSubmit={apply} aria-label="Filters">
        <div class="filter-grid">
          {filters.map((f) => (
            <div class="field" key={f.name}>
              <label for={"a-" + f.name}>{f.label}</label>
              {f.type === "kind" ? (
                <select id={"a-" + f.name} name={f.name} value={form[f.name] ?? ""} onChange={(e) => set(f.name, (e.currentTarget as HTMLSelectElement).value)}>
                  <option value="">any</option>
                  {kinds.map((k) => (
                    <option key={k} value={k}>
                      {k}
                    </option>
                  ))}
                </select>
              ) : (
                <input
                  id={"a-" + f.name}
                  name={f.name}
                  type={f.type === "time" ? "datetime-local" : "text"}
                  step={f.type === "time" ? 1 : undefined}
                  value={form[f.name] ?? ""}
                  aria-describedby={"a-" + f.name + "-hint"}
                  onInput={(e) => set(f.name, (e.currentTarget as HTMLInputElement).value)}
                />
              )}
              {f.hint && (
                <p class="hint" id={"a-" + f.name + "-hint"}>
                  {f.hint}
                </p>
              )}
            </div>
          ))}
          <div class="field">
            <label for="a-limit">Entries a page</label>
            <select id="a-limit" name="limit" value={form.limit ?? "50"} onChange={(e) => set("limit", (e.currentTarget as HTMLSelectElement).value)}>
              {sizes.map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          </div>
        </div>
        <div class="actions">
          <button type="submit" class="primary">
            Apply filters
          </button>
          {(active.length > 0 || q.get("before")) && (
            <Link href="/admin/audit" class="button">
              Clear filters
            </Link>
          )}
        </div>
      </form>
      {active.length > 0 && (
        <ul class="chips" aria-label="Active filters">
          {active.map((f) => (
            <li key={f.name}>
              <Link href={with_(q, f.name, null)} aria-label={"Remove the filter " + f.label + ": " + q.get(f.name)}>
                {f.name}: {q.get(f.name)} <span aria-hidden="true">×</span>
              </Link>
            </li>
          ))}
        </ul>
      )}
      <ErrorNote error={error} />
      {q.get("before") && (
        <p class="muted small">
          Older entries, before <code>{q.get("before")}</code>. <Link href={with_(q, "before", null)}>Back to the newest</Link>
        </p>
      )}
      <div class="audit-results" data-loaded={answer?.q === apiQuery ? apiQuery || "?" : ""}>
        {page === null ? (
          !error && (
            <table class="list" aria-busy="true">
              <caption class="visually-hidden">Reading the audit log…</caption>
              <AuditHead />
              <tbody>
                {Array.from({ length: 6 }, (_, i) => (
                  <tr key={i} class="skeleton-row" aria-hidden="true">
                    <td colSpan={6} />
                  </tr>
                ))}
              </tbody>
            </table>
          )
        ) : page.items.length === 0 ? (
          <div class="empty-state small">
            <p>{active.length > 0 ? "No entry matches these filters. Widen the time range, or remove a filter above." : q.get("before") ? "No older entries." : "No entries yet: every change made on this installation is recorded here."}</p>
          </div>
        ) : (
          <table class="list audit-list" data-table="audit" data-query={apiQuery}>
            <caption class="visually-hidden">Audit entries, newest first</caption>
<AuditHead />
            <tbody>
              {page.items.map((e) => (
                <Row key={e.id} e={e} q={q} names={names} />
              ))}
            </tbody>
          </table>
        )}
      </div>
      {page?.next_before && (
        <nav class="pager" aria-label="Pages">
          <Link href={older(q, page.next_before)} class="button" data-older="true">
            Older entries
          </Link>
        </nav>
      )}
    </div>
  );
}

function AuditHead() {
  return (
    <thead>
      <tr>
        <th scope="col">When</th>
        <th scope="col">Who</th>
        <th scope="col">Action</th>
        <th scope="col">Target</th>
        <th scope="col">Outcome</th>
        <th scope="col">Details</th>
      </tr>
    </thead>
  );
}

function Row(props: { e: Entry; q: URLSearchParams; names: Record<string, string> }) {
  const { e, q, names } = props;
  const failed = /_failed$|\.fail(ed)?$/.test(e.action);
  const details = e.details && Object.keys(e.details).length > 0 ? e.details : null;
  const [open, setOpen] = useState(false);
  return (
    <Fragment>
      <tr data-entry={e.id}>
        <td class="when">
          <time dateTime={e.time}>{when(e.time)}</time>
        </td>
        <td>
          <span class="pill pill-plain">{e.principal_kind}</span>{" "}
          {e.principal_id ? (
            <Link href={with_(q, "principal_id", e.principal_id)} title="Only entries by this principal">
              {names[e.principal_id] ?? <code>{e.principal_id}</code>}
            </Link>
          ) : (
            <span class="muted">—</span>
          )}
        </td>
        <td class="action">
          <Link href={with_(q, "action", e.action)} title="Only entries of this action">
            <code>{e.action}</code>
          </Link>
        </td>
        <td>
          {e.target_kind || e.target_id ? (
            <>
              {e.target_kind && <span class="muted">{e.target_kind} </span>}
              {e.target_id && (
                <Link href={with_(q, "target_id", e.target_id)} title="Only entries on this target">
                  {names[e.target_id] ?? <code>{e.target_id}</code>}
                </Link>
              )}
            </>
          ) : (
            <span class="muted">—</span>
          )}
          {e.app_id && e.app_id !== e.target_id && (
            <span class="small">
              {" "}
              in <Link href={"/apps/" + e.app_id}>{names[e.app_id] ?? e.app_id}</Link>
            </span>
          )}
          {e.app_id && e.app_id === e.target_id && (
            <span class="small">
              {" "}
              (<Link href={"/apps/" + e.app_id}>open</Link>)
            </span>
          )}
        </td>
        <td>{failed ? <span class="pill pill-bad">failed</span> : <span class="pill pill-ok">done</span>}</td>
        <td>
          <button type="button" class="small quiet toggle" aria-expanded={open} aria-controls={"detail-" + e.id} onClick={() => setOpen(!open)}>
            {open ? "Hide" : "Show"} {details ? Object.keys(details).length + (Object.keys(details).length === 1 ? " detail" : " details") : "request"}
          </button>
        </td>
      </tr>
      {open && (
        <tr class="detail-row" id={"detail-" + e.id}>
          <td colSpan={6}>
            <dl class="facts small">
              <dt>Entry</dt>
              <dd>
                <code>{e.id}</code>
              </dd>
              <dt>Request</dt>
              <dd>
                <code>{e.request_id || "—"}</code>
              </dd>
              {details &&
                Object.entries(details).map(([k, v]) => (
                  <Fragment key={k}>
                    <dt>{k}</dt>
                    <dd>
                      <code>{typeof v === "string" ? v : JSON.stringify(v)}</code>
                    </dd>
                  </Fragment>
                ))}
            </dl>
          </td>
        </tr>
      )}
    </Fragment>
  );
}
