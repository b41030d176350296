import { Fragment, type ComponentChildren } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { all, ApiError, call, seg, type Page } from "../api";
import { Link, navigate } from "../router";
import { Confirm, ErrorNote, ListTable, SecretOnce, Submit, usePoll, useSubmit, when } from "../ui";
import "./subscriptions.css";

// Event subscriptions, shared by an app's Events tab (/apps/<app ID>/events,
// the app's subscriptions) and the installation's Events page
// (/admin/events, every subscription the person manages): the list
// (GET /api/v1/subscriptions, ?app_id= for one app's), creating one
// (POST /api/v1/subscriptions: events picked from the catalogue,
// GET /api/v1/events; a webhook URL or a notification adapter, those of
// GET /api/v1/adapters when the person may read it; the request shaped
// with method, content type, write-only headers and a payload template),
// then its signing key shown once and a live test delivery
// (POST …/test, then GET …/deliveries/{id} until it ends). The
// subscription the address names: its facts, the on/off switch (PATCH
// enabled), edit (PATCH), rotate key (confirmed; the new key shown once),
// send a test, delete (confirmed), and its delivery log (GET …/deliveries,
// newest first, page by page) with each delivery's attempts and Resend
// (POST …/deliveries/{id}/resend). The API decides who may do what and
// its refusal is shown where it applies (at the form's field it names).

/** Subscription is a subscription as the API shows it: header names,
 * never values; keys' dates, never the keys. */
export interface Subscription {
  id: string;
  app_id: string | null;
  owner_id: string;
  events: string[];
  url: string | null;
  adapter_id: string | null;
  method: string;
  content_type: string;
  /** header_names is null when it sends no extra header. */
  header_names: string[] | null;
  payload_template: string | null;
  enabled: boolean;
  disabled_reason: string | null;
  failing_since: string | null;
  signing_keys: { created_at: string; retires_at: string | null }[];
  created_at: string;
  updated_at: string;
}

/** Attempt is one try of a delivery. */
export interface Attempt {
  at: string;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
}

/** Delivery is one event sent to one subscription, with its attempts. */
export interface Delivery {
  id: string;
  subscription_id: string;
  event_id: string;
  event_type: string;
  state: "pending" | "delivered" | "retry_scheduled" | "failed";
  attempts: Attempt[];
  next_attempt_at: string | null;
  created_at: string;
}

/** EventKind is an event of the catalogue (GET /api/v1/events). */
export interface EventKind {
  name: string;
  scope: "app" | "install" | "app_or_install";
  meaning: string;
  data: string[] | null;
}

interface Adapter {
  adapter_id: string;
  category: string;
  kind: string;
  deleted: boolean;
}

/** Notifiers are the notification adapters, when the person may list adapters. */
type Notifiers = { readable: false } | { readable: true; items: Adapter[] };

const subsPath = "/subscriptions";

let catalogue: Promise<EventKind[]> | null = null;

/** useCatalogue reads the event catalogue once per page load. */
function useCatalogue(): { kinds: EventKind[] | null; error: unknown } {
  const [kinds, setKinds] = useState<EventKind[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    catalogue ??= all<EventKind>("/events");
    catalogue.then(setKinds, (e) => {
      catalogue = null;
      setError(e);
    });
  }, []);
  return { kinds, error };
}

/** useNotifiers lists the notification adapters; a refusal (no install.view) means none are offered. */
function useNotifiers(): Notifiers | null {
  const [n, setN] = useState<Notifiers | null>(null);
  useEffect(() => {
    all<Adapter>("/adapters").then(
      (items) => setN({ readable: true, items: items.filter((a) => a.category === "notification" && !a.deleted) }),
      () => setN({ readable: false }),
    );
  }, []);
  return n;
}

/** Created is what the page keeps of a subscription just made: its key (shown once) and its first test. */
interface Fresh {
  id: string;
  key: string;
  test: Delivery | null;
  testError: unknown;
}

export interface SubscriptionsProps {
  /** appID is the app whose subscriptions are shown and made; null: every
   * subscription the person manages, new ones install-wide. */
  appID: string | null;
  /** base is the page's address; a subscription's is base/<ID>. */
  base: string;
  /** selected is the subscription the address names ("" for none). */
  selected: string;
  /** userID is the signed-in account (its subscriptions say "you"). */
  userID: string | null;
  /** appNames name apps by ID, where known (the installation's page). */
  appNames?: Record<string, string>;
  /** createNote is said above the form (what the person may not do). */
  createNote?: ComponentChildren;
  /** empty is the empty list's text. */
  empty: ComponentChildren;
}

export function Subscriptions(props: SubscriptionsProps) {
  const { appID, base, selected } = props;
  const listPath = subsPath + (appID ? "?app_id=" + seg(appID) : "");
  const [items, setItems] = useState<Subscription[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [creating, setCreating] = useState(false);
  const [fresh, setFresh] = useState<Fresh | null>(null);
  const { kinds, error: catError } = useCatalogue();
  const notifiers = useNotifiers();
  const load = useCallback(async () => {
    try {
      setItems(await all<Subscription>(listPath));
      setError(null);
    } catch (e) {
      setError(e);
    }
  }, [listPath]);
  usePoll(load, 5000, [load]);
  // A key shown once is forgotten when the person goes to another subscription.
  useEffect(() => {
    if (fresh && fresh.id !== selected) setFresh(null);
  }, [selected]);

  const created = async (c: { subscription: Subscription; signing_key: string }) => {
    setCreating(false);
    const id = c.subscription.id;
    setItems((xs) => (xs && !xs.some((s) => s.id === id) ? [...xs, c.subscription] : xs));
    let test: Delivery | null = null;
    let testError: unknown = null;
    try {
      test = (await call<{ delivery: Delivery }>("POST", subsPath + "/" + seg(id) + "/test")).delivery;
    } catch (e) {
      testError = e;
    }
    setFresh({ id, key: c.signing_key, test, testError });
    navigate(base + "/" + id);
    load();
  };

  const chosen = items?.find((s) => s.id === selected);
  return (
    <div class="subscriptions">
      <div class="actions">
        <button type="button" class="disclosure-button" aria-expanded={creating} aria-controls="sub-create" onClick={() => setCreating(!creating)}>
          <span class="chevron" aria-hidden="true" />
          New subscription
        </button>
        <span class="hint">{appID ? "Events of this app, sent to a webhook of yours or a notification adapter." : "Install-wide: every event of the installation, or those you pick."}</span>
      </div>
      {creating && (
        <section id="sub-create" class="panel block sub-create" aria-labelledby="sub-create-h">
          <h2 id="sub-create-h">{appID ? "New subscription to this app’s events" : "New install-wide subscription"}</h2>
          {props.createNote}
          <Refused error={catError} />
          <SubscriptionForm appID={appID} kinds={kinds} notifiers={notifiers} onDone={created} onCancel={() => setCreating(false)} />
        </section>
      )}
      <Refused error={error} />
      <section class="block" aria-labelledby="subs-h">
        <h2 id="subs-h">Subscriptions</h2>
        {items === null ? (
          <ListTable name="subscriptions" caption="Subscriptions" columns={columns(appID)} fixed />
        ) : items.length === 0 ? (
          <div class="empty-state small">
            <p>{props.empty}</p>
          </div>
        ) : (
          <ListTable name="subscriptions" caption="Subscriptions, oldest first" columns={columns(appID)} fixed>
            {items.map((s) => (
              <tr key={s.id} data-subscription={s.id} class={s.id === selected ? "selected" : ""}>
                <td>
                  <Link href={base + "/" + s.id} aria-current={s.id === selected ? "true" : undefined} class="sub-target">
                    {target(s)}
                  </Link>
                </td>
                <td title={s.events.join(", ")}>
                  <EventList events={s.events} />
                </td>
                {!appID && <td>{s.app_id ? <Link href={"/apps/" + s.app_id + "/events/" + s.id}>{props.appNames?.[s.app_id] ?? s.app_id}</Link> : "Install-wide"}</td>}
                <td>{owner(s.owner_id, props.userID)}</td>
                <td>
                  <SubState sub={s} />
                </td>
              </tr>
            ))}
          </ListTable>
        )}
      </section>
      {selected && (
        <Detail
          key={selected}
          id={selected}
          appID={appID}
          base={base}
          fromList={chosen}
          fresh={fresh?.id === selected ? fresh : null}
          onForgetKey={() => setFresh(null)}
          kinds={kinds}
          notifiers={notifiers}
          userID={props.userID}
          appNames={props.appNames}
          onChanged={load}
        />
      )}
    </div>
  );
}

function columns(appID: string | null): string[] {
  return appID ? ["Sends to", "Events", "Owner", "State"] : ["Sends to", "Events", "App", "Owner", "State"];
}

function target(s: Subscription): string {
  return s.url ?? "adapter " + (s.adapter_id ?? "?");
}

function owner(id: string, me: string | null): string {
  return id === me ? "you" : id;
}

function EventList(props: { events: string[] }) {
  return (
    <span class="event-list">
      {props.events.map((e, i) => (
        <Fragment key={e}>
          {i > 0 && ", "}
          <code>{e}</code>
        </Fragment>
      ))}
    </span>
  );
}

/** SubState says whether a subscription sends: on, failing, or off. */
function SubState(props: { sub: Subscription }) {
  const s = props.sub;
  if (!s.enabled) return <span class="pill pill-plain">off</span>;
  if (s.failing_since) return <span class="pill pill-bad">failing</span>;
  return <span class="pill pill-ok">on</span>;
}

/** fieldOf is the form field a refusal is about ("" for the form as a whole). */
function fieldOf(e: unknown): string {
  return e instanceof ApiError ? e.field.split(/[.[]/)[0] : "";
}

const formFields = ["events", "url", "adapter_id", "method", "content_type", "headers", "payload_template"];
const shapeFields = ["method", "content_type", "headers", "payload_template"];

interface HeaderRow {
  n: number;
  name: string;
  value: string;
}

/**
 * SubscriptionForm creates a subscription (sub absent) or changes one.
 * The API's refusal is shown at the field it names.
 */
function SubscriptionForm(props: {
  appID: string | null;
  sub?: Subscription;
  kinds: EventKind[] | null;
  notifiers: Notifiers | null;
  onDone: (created: { subscription: Subscription; signing_key: string }) => void | Promise<void>;
  onCancel: () => void;
}) {
  const { sub } = props;
  const px = sub ? "edit" : "new";
  const [events, setEvents] = useState<string[]>(sub?.events ?? []);
  const [kind, setKind] = useState<"webhook" | "adapter">(sub?.adapter_id ? "adapter" : "webhook");
  const [url, setURL] = useState(sub?.url ?? "");
  const [adapterID, setAdapterID] = useState(sub?.adapter_id ?? "");
  const [shape, setShape] = useState(false);
  const [method, setMethod] = useState(sub?.method ?? "POST");
  const [contentType, setContentType] = useState(sub?.content_type ?? "application/json");
  const [replaceHeaders, setReplaceHeaders] = useState(!sub);
  const [headers, setHeaders] = useState<HeaderRow[]>([]);
  const [template, setTemplate] = useState(sub?.payload_template ?? "");
  const nextRow = useRef(1);
  const adapters = props.notifiers?.readable ? props.notifiers.items : [];
  const offerAdapters = props.notifiers?.readable === true || kind === "adapter";

  const form = useSubmit(async () => {
    const body: Record<string, unknown> = { events };
    if (!sub && props.appID) body.app_id = props.appID;
    if (kind === "webhook") {
      body.url = url.trim();
      if (!sub || method !== sub.method) body.method = method;
      if (!sub || contentType.trim() !== sub.content_type) body.content_type = contentType.trim();
      if (replaceHeaders) {
        const h: Record<string, string> = {};
        for (const r of headers) if (r.name.trim() !== "") h[r.name.trim()] = r.value;
        if (sub || Object.keys(h).length > 0) body.headers = h;
      }
      if (sub ? template !== (sub.payload_template ?? "") : template.trim() !== "") body.payload_template = template;
    } else {
      body.adapter_id = adapterID;
    }
    if (sub) {
      const r = await call<{ subscription: Subscription }>("PATCH", subsPath + "/" + seg(sub.id), body);
      setHeaders([]);
      await props.onDone({ subscription: r.subscription, signing_key: "" });
    } else {
      const r = await call<{ subscription: Subscription; signing_key: string }>("POST", subsPath, body);
      setHeaders([]);
      await props.onDone(r);
    }
  });
  const field = fieldOf(form.error);
  const at = (name: string) => (field === name ? form.error : null);
  // A refusal about a shaping field opens the disclosure it is in.
  useEffect(() => {
    if (shapeFields.includes(field)) setShape(true);
  }, [form.error]);
  const general = formFields.includes(field) ? null : form.error;
  const invalid = (name: string) => (field === name ? true : undefined);
  const described = (name: string, hint?: string) => [hint, field === name ? px + "-" + name + "-error" : ""].filter(Boolean).join(" ") || undefined;

  return (
    <form class="subscription-form" onSubmit={form.onSubmit} noValidate aria-describedby={px + "-form-error"} data-form={px}>
      <EventPicker prefix={px} kinds={props.kinds} appScope={!!props.appID} value={events} onChange={setEvents} invalid={field === "events"} />
      <Refused id={px + "-events-error"} error={at("events")} />

      <fieldset class="sub-target-set">
        <legend>Send to</legend>
        {sub ? (
          <p class="hint">{kind === "webhook" ? "A webhook: svc sends each event, signed, to this address." : "A notification adapter."}</p>
        ) : offerAdapters ? (
          <div class="choices" role="radiogroup" aria-label="Kind of receiver">
            <label class="check">
              <input type="radio" name={px + "_target"} value="webhook" checked={kind === "webhook"} onChange={() => setKind("webhook")} /> A webhook of yours: svc sends each event, signed, to your address
            </label>
            <label class="check">
              <input type="radio" name={px + "_target"} value="adapter" checked={kind === "adapter"} disabled={adapters.length === 0} onChange={() => setKind("adapter")} aria-describedby={adapters.length === 0 ? px + "-no-adapter" : undefined} /> A notification
              adapter (chat, email or push)
            </label>
            {adapters.length === 0 && (
              <p class="hint" id={px + "-no-adapter"}>
                No notification adapter is configured yet; an administrator adds one under <Link href="/admin/adapters">Admin › Adapters</Link> (category notification).
              </p>
            )}
          </div>
        ) : null}
        {kind === "webhook" ? (
          <div class="field">
            <label for={px + "-url"}>Webhook address</label>
            <input
              id={px + "-url"}
              name="url"
              type="url"
              inputMode="url"
              autocomplete="off"
              spellcheck={false}
              placeholder="https://example.com/hooks/svc"
              value={url}
              onInput={(e) => setURL((e.currentTarget as HTMLInputElement).value)}
              aria-invalid={invalid("url")}
              aria-describedby={described("url", px + "-url-hint")}
            />
            <p class="hint" id={px + "-url-hint"}>
              http or https. Each request carries Svc-Event, Svc-Event-Id, Svc-Timestamp and Svc-Signature (HMAC-SHA256 under the signing key shown once after creating).
            </p>
            <Refused id={px + "-url-error"} error={at("url")} />
          </div>
        ) : (
          <div class="field">
            <label for={px + "-adapter"}>Notification adapter</label>
            <select id={px + "-adapter"} name="adapter_id" value={adapterID} onChange={(e) => setAdapterID((e.currentTarget as HTMLSelectElement).value)} aria-invalid={invalid("adapter_id")} aria-describedby={described("adapter_id")}>
              <option value="">Choose an adapter</option>
              {adapters.map((a) => (
                <option key={a.adapter_id} value={a.adapter_id}>
                  {a.kind} ({a.adapter_id})
                </option>
              ))}
              {adapterID && !adapters.some((a) => a.adapter_id === adapterID) && <option value={adapterID}>{adapterID}</option>}
            </select>
            <Refused id={px + "-adapter_id-error"} error={at("adapter_id")} />
          </div>
        )}
      </fieldset>

      {kind === "webhook" && (
        <div class="shape">
          <button type="button" class="disclosure" aria-expanded={shape} aria-controls={px + "-shape"} onClick={() => setShape(!shape)}>
            <span class="chevron" aria-hidden="true" />
            Shape the request
          </button>
          <span class="hint"> {sub ? sub.method + ", " + sub.content_type + (sub.header_names?.length ? ", headers " + sub.header_names.join(", ") : "") + (sub.payload_template ? ", a template" : "") : "POST of the standard JSON body unless you change it"}</span>
          <div id={px + "-shape"} class="shape-panel" hidden={!shape}>
            <div class="form-grid">
              <div class="field">
                <label for={px + "-method"}>Method</label>
                <select id={px + "-method"} name="method" value={method} onChange={(e) => setMethod((e.currentTarget as HTMLSelectElement).value)} aria-invalid={invalid("method")} aria-describedby={described("method")}>
                  {["POST", "PUT", "PATCH"].map((m) => (
                    <option key={m} value={m}>
                      {m}
                    </option>
                  ))}
                </select>
                <Refused id={px + "-method-error"} error={at("method")} />
              </div>
              <div class="field">
                <label for={px + "-ctype"}>Content type</label>
                <input id={px + "-ctype"} name="content_type" autocomplete="off" spellcheck={false} value={contentType} onInput={(e) => setContentType((e.currentTarget as HTMLInputElement).value)} aria-invalid={invalid("content_type")} aria-describedby={described("content_type")} />
                <Refused id={px + "-content_type-error"} error={at("content_type")} />
              </div>
            </div>
            <fieldset class="headers-set" aria-describedby={described("headers", px + "-headers-hint")}>
              <legend>Extra headers</legend>
              <p class="hint" id={px + "-headers-hint"}>
                Values are write-only: stored encrypted and never shown again. The Svc-* headers are always sent and cannot be replaced.
                {sub && (sub.header_names?.length ? " Sent now: " + sub.header_names.join(", ") + "." : " None are sent now.")}
              </p>
              {sub && (
                <label class="check">
                  <input type="checkbox" name="replace_headers" checked={replaceHeaders} onChange={(e) => setReplaceHeaders((e.currentTarget as HTMLInputElement).checked)} /> Replace them with the rows below (none: send no extra header)
                </label>
              )}
              {replaceHeaders && (
                <>
                  {headers.map((h, i) => (
                    <div class="header-row" key={h.n}>
                      <label for={px + "-hname-" + h.n} class="visually-hidden">
                        Header {i + 1} name
                      </label>
                      <input id={px + "-hname-" + h.n} name="header_name" placeholder="Name" autocomplete="off" spellcheck={false} value={h.name} onInput={(e) => setHeaders(headers.map((x) => (x.n === h.n ? { ...x, name: (e.currentTarget as HTMLInputElement).value } : x)))} />
                      <label for={px + "-hvalue-" + h.n} class="visually-hidden">
                        Header {i + 1} value
                      </label>
                      <input id={px + "-hvalue-" + h.n} name="header_value" type="password" placeholder="Value" autocomplete="new-password" value={h.value} onInput={(e) => setHeaders(headers.map((x) => (x.n === h.n ? { ...x, value: (e.currentTarget as HTMLInputElement).value } : x)))} />
                      <button type="button" class="small" aria-label={"Remove header " + (i + 1)} onClick={() => setHeaders(headers.filter((x) => x.n !== h.n))}>
                        Remove
                      </button>
                    </div>
                  ))}
                  <button type="button" class="small" onClick={() => setHeaders([...headers, { n: nextRow.current++, name: "", value: "" }])}>
                    Add a header
                  </button>
                </>
              )}
              <Refused id={px + "-headers-error"} error={at("headers")} />
            </fieldset>
            <div class="field">
              <label for={px + "-template"}>Payload template</label>
              <textarea
                id={px + "-template"}
                name="payload_template"
                rows={5}
                spellcheck={false}
                placeholder={'{"text": {{json .Subject}}, "link": {{json .Link}}}'}
                value={template}
                onInput={(e) => setTemplate((e.currentTarget as HTMLTextAreaElement).value)}
                aria-invalid={invalid("payload_template")}
                aria-describedby={described("payload_template", px + "-template-hint")}
              />
              <div class="hint" id={px + "-template-hint"}>
                <p>Empty: the standard JSON body. Otherwise a Go text/template, checked against a sample event when saved (a JSON content type needs JSON output).</p>
                <p>
                  Variables: <code>.ID</code> <code>.Type</code> <code>.OccurredAt</code> <code>.App</code> (<code>.App.ID</code> <code>.App.Name</code> <code>.App.Slug</code>) <code>.Actor</code> <code>.Data</code> <code>.Subject</code> <code>.Body</code>{" "}
                  <code>.Fields</code> <code>.Link</code> <code>.Envelope</code>. Functions: <code>json</code>, <code>default</code>.
                </p>
              </div>
              <Refused id={px + "-payload_template-error"} error={at("payload_template")} />
            </div>
          </div>
        </div>
      )}

      <div class="form-actions">
        <Submit busy={form.busy}>{sub ? "Save changes" : "Create subscription"}</Submit>
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
      <ErrorNote error={general} id={px + "-form-error"} />
    </form>
  );
}

/** Refused shows a refusal where it applies (under the field it is about), taking no room without one. */
function Refused(props: { id?: string; error: unknown }) {
  if (!props.error) return null;
  return <ErrorNote error={props.error} id={props.id} />;
}

/**
 * EventPicker chooses a subscription's filters from the catalogue: every
 * event (*), all of a family (deploy.*), or events by name, grouped by
 * family. Filters it does not know (an older prefix) are kept and shown.
 */
function EventPicker(props: { prefix: string; kinds: EventKind[] | null; appScope: boolean; value: string[]; onChange: (v: string[]) => void; invalid: boolean }) {
  const { prefix: px } = props;
  const chosen = new Set(props.value);
  const kinds = (props.kinds ?? []).filter((k) => !props.appScope || k.scope !== "install");
  const families: { name: string; kinds: EventKind[] }[] = [];
  for (const k of kinds) {
    const f = k.name.split(".")[0];
    const fam = families.find((x) => x.name === f);
    if (fam) fam.kinds.push(k);
    else families.push({ name: f, kinds: [k] });
  }
  const known = new Set<string>(["*", ...families.map((f) => f.name + ".*"), ...kinds.map((k) => k.name)]);
  const others = props.value.filter((v) => !known.has(v));
  const toggle = (filter: string, on: boolean) => {
    const next = props.value.filter((v) => v !== filter);
    props.onChange(on ? [...next, filter] : next);
  };
  const every = chosen.has("*");
  const summary = every ? "every event" : props.value.length === 0 ? "nothing yet" : minimal(props.value, families).join(", ");
  return (
    <fieldset class="event-picker" aria-invalid={props.invalid || undefined} aria-describedby={px + "-events-summary" + (props.invalid ? " " + px + "-events-error" : "")}>
      <legend>Events to send</legend>
      <label class="check every">
        <input type="checkbox" name="events" value="*" checked={every} onChange={(e) => toggle("*", (e.currentTarget as HTMLInputElement).checked)} /> Every event{props.appScope ? " of this app" : ""} (<code>*</code>), including those added later
      </label>
      {props.kinds === null ? (
        <p class="placeholder" aria-busy="true">
          Reading the event catalogue…
        </p>
      ) : (
        <div class="families">
          {families.map((f) => {
            const all = every || chosen.has(f.name + ".*");
            return (
              <fieldset class="family" key={f.name} data-family={f.name}>
                <legend>{f.name}</legend>
                <label class="check family-all">
                  <input type="checkbox" name="events" value={f.name + ".*"} checked={all} disabled={every} onChange={(e) => toggle(f.name + ".*", (e.currentTarget as HTMLInputElement).checked)} /> All of {f.name} (
                  <code>{f.name}.*</code>)
                </label>
                <ul>
                  {f.kinds.map((k) => {
                    const id = px + "-ev-" + k.name.replace(/\W/g, "-");
                    return (
                      <li key={k.name}>
                        <input type="checkbox" id={id} name="events" value={k.name} checked={all || chosen.has(k.name)} disabled={all} onChange={(e) => toggle(k.name, (e.currentTarget as HTMLInputElement).checked)} aria-describedby={id + "-m"} />
                        <label for={id}>
                          <code>{k.name.slice(f.name.length + 1)}</code>
                        </label>
                        <span class="meaning" id={id + "-m"}>
                          {k.meaning}
                        </span>
                      </li>
                    );
                  })}
                </ul>
              </fieldset>
            );
          })}
          {others.length > 0 && (
            <fieldset class="family" data-family="">
              <legend>Other filters</legend>
              <ul>
                {others.map((o) => (
                  <li key={o}>
                    <label class="check">
                      <input type="checkbox" name="events" value={o} checked={chosen.has(o)} onChange={(e) => toggle(o, (e.currentTarget as HTMLInputElement).checked)} /> <code>{o}</code>
                    </label>
                  </li>
                ))}
              </ul>
            </fieldset>
          )}
        </div>
      )}
      <p class="hint" id={px + "-events-summary"} aria-live="polite">
        Sends: {summary}.
      </p>
    </fieldset>
  );
}

/** minimal is the filters chosen without those another covers (all of a family covers its names). */
function minimal(value: string[], families: { name: string; kinds: EventKind[] }[]): string[] {
  if (value.includes("*")) return ["*"];
  return value.filter((v) => {
    const f = families.find((x) => v.startsWith(x.name + ".") && v !== x.name + ".*");
    return !(f && value.includes(f.name + ".*"));
  });
}

/** KeyOnce shows a signing key the API answers once, with Copy. */
function KeyOnce(props: { value: string; title: string; children?: ComponentChildren; onDone: () => void }) {
  return (
    <SecretOnce title={props.title} value={props.value} name="signing_key" hint="It is shown only now: svc keeps it encrypted and never shows it again." onDone={props.onDone}>
      <p class="once-note">
        <strong>Shown once.</strong> Copy it now into your receiver, which checks each request’s Svc-Signature with it. Lost, it can only be replaced (Rotate key).
      </p>
      {props.children}
    </SecretOnce>
  );
}

/** ended says whether a delivery has its outcome. */
function ended(d: Delivery): boolean {
  return d.state === "delivered" || d.state === "failed";
}

/**
 * TestDelivery follows a test delivery until it ends (delivered or
 * failed), showing its attempt.
 */
function TestDelivery(props: { subID: string; delivery: Delivery | null; error: unknown; onEnded: () => void }) {
  const [d, setD] = useState<Delivery | null>(props.delivery);
  const [error, setError] = useState<unknown>(props.error);
  useEffect(() => {
    setD(props.delivery);
    setError(props.error);
    if (!props.delivery || ended(props.delivery)) return;
    let live = true;
    let timer = 0;
    const path = subsPath + "/" + seg(props.subID) + "/deliveries/" + seg(props.delivery.id);
    const tick = async () => {
      try {
        const next = (await call<{ delivery: Delivery }>("GET", path)).delivery;
        if (!live) return;
        setD(next);
        if (ended(next)) {
          props.onEnded();
          return;
        }
      } catch (e) {
        if (!live) return;
        setError(e);
        return;
      }
      timer = window.setTimeout(tick, 400);
    };
    timer = window.setTimeout(tick, 200);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [props.delivery, props.error]);
  const last = d?.attempts[d.attempts.length - 1];
  return (
    <div class="panel test-delivery" aria-labelledby="test-h" data-test-state={d?.state ?? (error ? "refused" : "")}>
      <h3 id="test-h">Test delivery</h3>
      <p role="status" aria-live="polite" class="test-line">
        {error ? (
          "The test could not be sent."
        ) : !d ? (
          "Sending a subscription.test event…"
        ) : d.state === "delivered" ? (
          <>
            <span class="pill pill-ok">delivered</span> The receiver answered {last?.status_code ?? "—"} in {ms(last?.duration_ms)}.
          </>
        ) : d.state === "failed" ? (
          <>
            <span class="pill pill-bad">failed</span> {last?.error ?? "No answer."}
            {last?.status_code ? " (status " + last.status_code + ")" : ""} after {ms(last?.duration_ms)}.
          </>
        ) : (
          <>
            <span class="pill pill-busy">{d.state === "pending" ? "sending" : "retry scheduled"}</span> A <code>subscription.test</code> event is on its way…
          </>
        )}
      </p>
      <Refused error={error} />
    </div>
  );
}

function ms(n: number | undefined): string {
  return n === undefined ? "—" : n + " ms";
}

/** Detail is one subscription: facts, switch, edit, rotate, test, delete, and its delivery log. */
function Detail(props: {
  id: string;
  /** appID is the app whose page this is (null on the installation's). */
  appID: string | null;
  base: string;
  fromList?: Subscription;
  fresh: Fresh | null;
  onForgetKey: () => void;
  kinds: EventKind[] | null;
  notifiers: Notifiers | null;
  userID: string | null;
  appNames?: Record<string, string>;
  onChanged: () => Promise<void>;
}) {
  const path = subsPath + "/" + seg(props.id);
  const [sub, setSub] = useState<Subscription | null>(props.fromList ?? null);
  const [error, setError] = useState<unknown>(null);
  const [actionError, setActionError] = useState<unknown>(null);
  const [editing, setEditing] = useState(false);
  const [asking, setAsking] = useState<"rotate" | "delete" | null>(null);
  const [busy, setBusy] = useState(false);
  const [rotated, setRotated] = useState("");
  const [test, setTest] = useState<{ delivery: Delivery | null; error: unknown } | null>(props.fresh ? { delivery: props.fresh.test, error: props.fresh.testError } : null);
  const [said, setSaid] = useState("");
  const [tick, setTick] = useState(0);
  const refresh = () => setTick((n) => n + 1);
  const heading = useRef<HTMLHeadingElement>(null);
  // A subscription just made arrives with its key and its first test.
  useEffect(() => {
    if (props.fresh) setTest({ delivery: props.fresh.test, error: props.fresh.testError });
  }, [props.fresh]);

  const reload = useCallback(async () => {
    try {
      setSub((await call<{ subscription: Subscription }>("GET", path)).subscription);
      setError(null);
    } catch (e) {
      setError(e);
    }
  }, [path]);
  useEffect(() => {
    reload();
  }, [reload]);
  // The list polls: a change it sees (a dispatcher turning it off) is read here too.
  useEffect(() => {
    if (props.fromList && sub && props.fromList.updated_at !== sub.updated_at) reload();
  }, [props.fromList?.updated_at]);

  const act = async (what: () => Promise<void>) => {
    setBusy(true);
    setActionError(null);
    setSaid("");
    try {
      await what();
    } catch (e) {
      setActionError(e);
    } finally {
      setBusy(false);
    }
  };
  const setEnabled = (on: boolean) =>
    act(async () => {
      const r = await call<{ subscription: Subscription }>("PATCH", path, { enabled: on });
      setSub(r.subscription);
      setSaid(on ? "Turned on: it sends events again, and its failure record is cleared." : "Turned off: it sends nothing until turned back on.");
      await props.onChanged();
    });
  const sendTest = () =>
    act(async () => {
      setTest({ delivery: null, error: null });
      try {
        const r = await call<{ delivery: Delivery }>("POST", path + "/test");
        setTest({ delivery: r.delivery, error: null });
      } catch (e) {
        setTest({ delivery: null, error: e });
      }
      refresh();
    });
  const rotate = () =>
    act(async () => {
      setAsking(null);
      const r = await call<{ signing_key: string }>("POST", path + "/rotate-key");
      setRotated(r.signing_key);
      await reload();
    });
  const remove = () =>
    act(async () => {
      setAsking(null);
      await call("DELETE", path);
      navigate(props.base);
      await props.onChanged();
    });

  const s = sub;
  const key = rotated || props.fresh?.key || "";
  return (
    <section class="block sub-detail" aria-labelledby="sub-h" data-subscription-detail={props.id}>
      <h2 id="sub-h" tabIndex={-1} ref={heading}>
        Subscription <code>{props.id}</code>{" "}
        {s ? (
          <SubState sub={s} />
        ) : (
          <span class="pill pill-plain unseen" aria-hidden="true">
            on
          </span>
        )}
      </h2>
      <Refused error={error} />
      {key && (
        <KeyOnce
          value={key}
          title={rotated ? "The new signing key" : "The subscription’s signing key"}
          onDone={() => {
            setRotated("");
            props.onForgetKey();
            heading.current?.focus(); // the key's panel goes: focus stays in the subscription
          }}
        >
          {rotated && <p class="hint">For 24 hours the replaced key signs too: Svc-Signature carries both (v1=&lt;new&gt; v1=&lt;old&gt;), so your receiver can switch over.</p>}
        </KeyOnce>
      )}
      {test && <TestDelivery subID={props.id} delivery={test.delivery} error={test.error} onEnded={refresh} />}
      <dl class="facts sub-facts">
        <dt>Sends to</dt>
        <dd>{s ? s.url ? <code class="wrap">{s.url}</code> : "notification adapter " + s.adapter_id : "…"}</dd>
        <dt>Events</dt>
        <dd>{s ? <EventList events={s.events} /> : "…"}</dd>
        <dt>Scope</dt>
        <dd>{s ? s.app_id ? s.app_id === props.appID ? "this app’s events" : <>the events of the app {props.appNames?.[s.app_id] ?? <code>{s.app_id}</code>}</> : "install-wide: every event of the installation" : "…"}</dd>
        <dt>Owner</dt>
        <dd>{s ? owner(s.owner_id, props.userID) : "…"}</dd>
        <dt>Request</dt>
        <dd>{s ? s.url ? <>{s.method} {s.content_type}{s.header_names?.length ? ", extra headers " + s.header_names.join(", ") : ""}{s.payload_template ? ", shaped by a template" : ", the standard body"}</> : "as the adapter writes it" : "…"}</dd>
        <dt>Signing keys</dt>
        <dd>{s ? s.url ? s.signing_keys.map((k) => (k.retires_at ? "a replaced key signs too until " + when(k.retires_at) : "the current key, made " + when(k.created_at))).join(" · ") || "none" : "none (an adapter signs nothing)" : "…"}</dd>
        <dt>Created</dt>
        <dd>{s ? when(s.created_at) : "…"}</dd>
      </dl>
      {s && (s.failing_since || s.disabled_reason) && (
        <div class="notice sub-failing">
          {s.failing_since && <p>Failing since {when(s.failing_since)}: every attempt since has failed. A subscription failing for a day is turned off.</p>}
          {s.disabled_reason && <p>Off: {s.disabled_reason}.</p>}
          {!s.enabled && <p>Turning it back on clears this record.</p>}
        </div>
      )}
      <div class="actions sub-actions" role="group" aria-label="Manage the subscription">
        <span class="switch-field">
          <button type="button" role="switch" id="sub-enabled" aria-checked={s?.enabled ?? false} disabled={!s || busy} onClick={() => s && setEnabled(!s.enabled)} aria-labelledby="sub-enabled-l">
            <span class="switch-track" aria-hidden="true">
              <span class={s ? "switch-knob" : "switch-knob unseen"} />
            </span>
          </button>
          <span id="sub-enabled-l">Sends events</span>
        </span>
        <button type="button" disabled={!s || busy} aria-expanded={editing} aria-controls="sub-edit" onClick={() => setEditing(!editing)}>
          Edit
        </button>
        <button type="button" disabled={!s || busy} onClick={sendTest}>
          Send test
        </button>
        {(!s || s.url) && (
          <button type="button" disabled={!s || busy} onClick={() => setAsking("rotate")}>
            Rotate key
          </button>
        )}
        <button type="button" class="danger" disabled={!s || busy} onClick={() => setAsking("delete")}>
          Delete
        </button>
      </div>
      <p class="status" role="status" aria-live="polite">
        {said}
      </p>
      <Refused error={actionError} />
      {editing && s && (
        <div id="sub-edit" class="panel sub-edit">
          <h3>Change the subscription</h3>
          <SubscriptionForm
            appID={s.app_id}
            sub={s}
            kinds={props.kinds}
            notifiers={props.notifiers}
            onDone={async (r) => {
              setSub(r.subscription);
              setEditing(false);
              setSaid("Saved.");
              await props.onChanged();
            }}
            onCancel={() => setEditing(false)}
          />
        </div>
      )}
      {asking === "rotate" && (
        <Confirm title="Rotate the signing key?" action="Rotate key" onConfirm={rotate} onCancel={() => setAsking(null)}>
          <p>A new key signs every request from now on. For 24 hours the current key signs too, so your receiver can switch to the new one; after that only the new key signs.</p>
          <p>The new key is shown once.</p>
        </Confirm>
      )}
      {asking === "delete" && (
        <Confirm title="Delete the subscription?" action="Delete subscription" danger onConfirm={remove} onCancel={() => setAsking(null)}>
          <p>
            Nothing more is sent to {s?.url ? <code class="wrap">{s.url}</code> : "its adapter"}, and its delivery log is deleted with it. This cannot be undone.
          </p>
        </Confirm>
      )}
      <DeliveryLog path={path + "/deliveries"} tick={tick} enabled={s?.enabled ?? true} />
    </section>
  );
}

const logPage = 20;

/** DeliveryLog is a subscription's deliveries, newest first, page by page, each with its attempts and Resend. */
function DeliveryLog(props: { path: string; tick: number; enabled: boolean }) {
  const [items, setItems] = useState<Delivery[] | null>(null);
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [open, setOpen] = useState<string[]>([]);
  const [said, setSaid] = useState("");
  const [busy, setBusy] = useState("");
  const [moreBusy, setMoreBusy] = useState(false);
  const paged = useRef(false); // more than the first page is shown

  // The first page, read again every few seconds: new deliveries and
  // attempts arrive at the top; pages read with More stay below it.
  const first = useCallback(async () => {
    try {
      const p = await call<Page<Delivery>>("GET", props.path + "?limit=" + logPage);
      setError(null);
      if (!paged.current) {
        setItems(p.items);
        setCursor(p.next_cursor);
        return;
      }
      const last = p.items[p.items.length - 1]?.id;
      setItems((old) => [...p.items, ...(old ?? []).filter((d) => last !== undefined && d.id < last)]);
    } catch (e) {
      setError(e);
    }
  }, [props.path]);
  usePoll(first, 2000, [first, props.tick]);

  const more = async () => {
    if (!cursor) return;
    setMoreBusy(true);
    try {
      const p = await call<Page<Delivery>>("GET", props.path + "?limit=" + logPage + "&cursor=" + seg(cursor));
      paged.current = true;
      setItems((old) => [...(old ?? []), ...p.items.filter((d) => !(old ?? []).some((o) => o.id === d.id))]);
      setCursor(p.next_cursor);
    } catch (e) {
      setError(e);
    } finally {
      setMoreBusy(false);
    }
  };
  const resend = async (d: Delivery) => {
    setBusy(d.id);
    setError(null);
    setSaid("");
    try {
      await call("POST", props.path + "/" + seg(d.id) + "/resend");
      setSaid("Resent " + d.event_type + " (" + d.id + "): its new attempt shows below.");
      if (!open.includes(d.id)) setOpen([...open, d.id]);
      await first();
    } catch (e) {
      setError(e);
    } finally {
      setBusy("");
    }
  };
  const toggle = (id: string) => setOpen(open.includes(id) ? open.filter((x) => x !== id) : [...open, id]);

  return (
    <div class="delivery-log">
      <h3 id="log-h">Delivery log</h3>
      <p class="hint">Newest first. Each delivery is one event for this subscription; open it to read its attempts. Resend makes a new attempt with the same event (the same Svc-Event-Id).{props.enabled ? "" : " The subscription is off: turn it on to resend."}</p>
      <p class="status" role="status" aria-live="polite">
        {said}
      </p>
      <Refused error={error} />
      {items !== null && items.length === 0 ? (
        <div class="empty-state small">
          <p>Nothing sent yet. Send a test event with Send test above, or wait for one of the events it subscribes to; each appears here with its attempts.</p>
        </div>
      ) : (
        <table class="list fixed" data-table="deliveries" aria-labelledby="log-h">
          <thead>
            <tr>
              <th scope="col">Event</th>
              <th scope="col">State</th>
              <th scope="col">Last attempt</th>
              <th scope="col">Made</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {items === null ? (
              <tr class="skeleton-row" aria-hidden="true">
                <td>&nbsp;</td>
                <td />
                <td />
                <td />
                <td />
              </tr>
            ) : (
              items.map((d) => {
                const last = d.attempts[d.attempts.length - 1];
                const isOpen = open.includes(d.id);
                return (
                  <Fragment key={d.id}>
                    <tr data-delivery={d.id} data-event={d.event_type} data-state={d.state}>
                      <td>
                        <code>{d.event_type}</code>
                      </td>
                      <td>
                        <DeliveryState d={d} />
                      </td>
                      <td class="last-attempt">{last ? (last.status_code ?? "no answer") + (last.error ? " · " + last.error : "") : "none yet"}</td>
                      <td>{when(d.created_at)}</td>
                      <td class="row-actions">
                        <button type="button" class="small" aria-expanded={isOpen} aria-controls={"attempts-" + d.id} onClick={() => toggle(d.id)}>
                          Attempts ({d.attempts.length})
                        </button>
                        <button type="button" class="small" disabled={!props.enabled || busy === d.id} aria-label={"Resend " + d.event_type + " " + d.id} onClick={() => resend(d)}>
                          Resend
                        </button>
                      </td>
                    </tr>
                    {isOpen && (
                      <tr id={"attempts-" + d.id} class="attempts-row" data-attempts={d.id}>
                        <td colSpan={5}>
                          <Attempts d={d} />
                        </td>
                      </tr>
                    )}
                  </Fragment>
                );
              })
            )}
          </tbody>
        </table>
      )}
      {cursor && (
        <p>
          <button type="button" onClick={more} disabled={moreBusy} aria-busy={moreBusy}>
            More deliveries
          </button>
        </p>
      )}
    </div>
  );
}

function DeliveryState(props: { d: Delivery }) {
  const d = props.d;
  const cls = d.state === "delivered" ? "pill-ok" : d.state === "failed" ? "pill-bad" : "pill-busy";
  return <span class={"pill " + cls}>{d.state.replace("_", " ")}</span>;
}

/** Attempts lists one delivery's attempts. */
function Attempts(props: { d: Delivery }) {
  const d = props.d;
  return (
    <div class="attempts">
      <p class="small muted">
        Event <code>{d.event_id}</code>, delivery <code>{d.id}</code>
        {d.next_attempt_at && d.state !== "delivered" && d.state !== "failed" ? ", next attempt " + when(d.next_attempt_at) : ""}.
      </p>
      {d.attempts.length === 0 ? (
        <p class="small">No attempt yet.</p>
      ) : (
        <table class="list attempts-table">
          <caption class="visually-hidden">Attempts of {d.id}</caption>
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Status</th>
              <th scope="col">Error</th>
              <th scope="col">Duration</th>
            </tr>
          </thead>
          <tbody>
            {d.attempts.map((a, i) => (
              <tr key={i} data-attempt={i}>
                <td>{when(a.at)}</td>
                <td>{a.status_code ?? "no answer"}</td>
                <td>{a.error ?? "—"}</td>
                <td>{ms(a.duration_ms)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
