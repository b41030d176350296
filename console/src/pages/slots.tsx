import { useEffect, useState } from "preact/hooks";
import { all, call, seg } from "../api";
import { ErrorNote, ListTable, Submit, useSubmit, when } from "../ui";
import type { AppPageProps } from "./app";
import { Listed, useList } from "./lists";
import "./slots.css";

// The slots, /apps/<app ID>/slots: what the app needs (every slot its
// pinned and latest spec revisions declare: type, required) and what fills
// each (filled, mode, adapter_id, the fields that may be shown, the names
// of secret fields, effective: next_deploy), then fills of slots no longer
// declared (GET …/slots, every page). A slot is filled in exactly one way
// (PUT …/slots/{key}): provisioned by a slots adapter (which one, and
// whether to draw a new password), bound to a URL, or given values, whose
// secret fields are write-only. A fill applies at the app's next deploy.

/** SlotView is a slot as GET …/slots lists it: never a credential. */
export interface SlotView {
  key: string;
  type: string;
  required: boolean;
  declared: boolean;
  filled: boolean;
  mode: string | null;
  adapter_id: string | null;
  fields: Record<string, string> | null;
  secret_fields: string[] | null;
  effective: string | null;
  updated_at: string | null;
  note?: string;
}

interface AdapterView {
  adapter_id: string;
  category: string;
  kind: string;
  primary: boolean;
  deleted: boolean;
}

/** The fields of the slot types the API knows (internal/slots). */
const knownFields: Record<string, { name: string; secret: boolean; hint?: string }[]> = {
  postgres: [
    { name: "host", secret: false },
    { name: "port", secret: false, hint: "default 5432" },
    { name: "database", secret: false },
    { name: "username", secret: false },
    { name: "password", secret: true },
    { name: "sslmode", secret: false, hint: "for example require" },
  ],
};

export function Slots(props: AppPageProps) {
  const { appID } = props;
  const base = "/apps/" + seg(appID) + "/slots";
  const { items, setItems, error, load } = useList<SlotView>(base);
  const [editing, setEditing] = useState<string | null>(null);
  const [adapters, setAdapters] = useState<AdapterView[] | null>(null);
  const [saved, setSaved] = useState("");

  useEffect(() => {
    setItems(null);
    setEditing(null);
    load();
    // Which slots adapters there are (needs install.view; without it the
    // adapter is typed, or left to the primary one).
    all<AdapterView>("/adapters").then((as) => setAdapters(as.filter((a) => a.category === "slots" && !a.deleted)), () => setAdapters(null));
  }, [load]);

  const declared = items?.filter((s) => s.declared) ?? [];
  const undeclared = items?.filter((s) => !s.declared) ?? [];
  const slot = editing ? items?.find((s) => s.key === editing) : undefined;

  return (
    <div class="slots">
      <p class="lead">What the app needs from outside (a database, a cache) and how each need is filled. A change takes effect at the app’s next deploy.</p>
      <ErrorNote error={error} />
      <p class="status" role="status" aria-live="polite">
        {saved}
      </p>
      <section class="block" aria-labelledby="slots-h">
        <h2 id="slots-h">Needs</h2>
        <Listed
          items={items === null ? null : declared}
          reading="Reading slots…"
          empty={
            <>
              The app’s spec declares no slots. Declare one under <code>slots:</code> in the spec (for example a <code>postgres</code> database) and it is listed
              here to fill.
            </>
          }
        >
          {(declared) => <SlotTable caption="Slots the spec declares" items={declared} editing={editing} onFill={(k) => (setSaved(""), setEditing(editing === k ? null : k))} />}
        </Listed>
      </section>
      {slot && (
        <FillForm
          key={slot.key}
          base={base}
          slot={slot}
          adapters={adapters}
          onCancel={() => setEditing(null)}
          onFilled={async (v) => {
            setEditing(null);
            setSaved(v.key + " is filled (" + v.mode + "); this takes effect at the app’s next deploy.");
            await load();
          }}
        />
      )}
      {undeclared.length > 0 && (
        <section class="block" aria-labelledby="undeclared-h">
          <h2 id="undeclared-h">Fills of slots no longer declared</h2>
          <p class="hint">The spec no longer names these slots; their fills are kept (a provisioned resource is never dropped) but nothing receives them.</p>
          <SlotTable caption="Fills of slots the spec no longer declares" items={undeclared} editing={null} />
        </section>
      )}
    </div>
  );
}

function SlotTable(props: { caption: string; items: SlotView[]; editing: string | null; onFill?: (key: string) => void }) {
  return (
    <ListTable name="slots" caption={props.caption} columns={["Slot", "Type", "Filled", "Fields", "Changed", ...(props.onFill ? [""] : [])]}>
        {props.items.map((s) => (
          <tr key={s.key} data-slot={s.key}>
            <th scope="row">
              <code>{s.key}</code>
              {s.required ? <span class="badge">required</span> : <span class="badge">optional</span>}
            </th>
            <td>{s.type}</td>
            <td>
              {s.filled ? <span class="pill pill-ok">{s.mode}</span> : s.required ? <span class="pill pill-bad">not filled</span> : <span class="pill pill-plain">not filled</span>}
              {s.adapter_id && <span class="muted small"> by {s.adapter_id}</span>}
              {s.effective === "next_deploy" && <div class="muted small">takes effect at the next deploy</div>}
              {s.note && <div class="muted small">{s.note}</div>}
            </td>
            <td>
              <FieldList fields={s.fields} secret={s.secret_fields} />
            </td>
            <td>{when(s.updated_at)}</td>
            {props.onFill && (
              <td class="row-actions">
                <button type="button" class="small" aria-expanded={props.editing === s.key} aria-controls="fill-form" onClick={() => props.onFill!(s.key)} aria-label={(s.filled ? "Change how " : "Fill ") + s.key + (s.filled ? " is filled" : "")}>
                  {s.filled ? "Change" : "Fill"}
                </button>
              </td>
            )}
          </tr>
        ))}
    </ListTable>
  );
}

function FieldList(props: { fields: Record<string, string> | null; secret: string[] | null }) {
  const shown = Object.entries(props.fields ?? {}).sort(([a], [b]) => a.localeCompare(b));
  const secret = props.secret ?? [];
  if (shown.length === 0 && secret.length === 0) return <span class="muted">—</span>;
  return (
    <dl class="slot-fields">
      {shown.map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>
            <code>{v}</code>
          </dd>
        </div>
      ))}
      {secret.map((k) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd class="muted">set, never shown</dd>
        </div>
      ))}
    </dl>
  );
}

type Mode = "provision" | "bind" | "value";

interface Row {
  name: string;
  value: string;
  secret: boolean;
}

/** FillForm fills one slot in exactly one way. */
function FillForm(props: { base: string; slot: SlotView; adapters: AdapterView[] | null; onCancel: () => void; onFilled: (v: SlotView) => Promise<void> }) {
  const { slot } = props;
  const known = knownFields[slot.type];
  const [mode, setMode] = useState<Mode>((slot.mode as Mode) ?? "provision");
  const [adapterID, setAdapterID] = useState(slot.mode === "provision" ? slot.adapter_id ?? "" : "");
  const [rotate, setRotate] = useState(false);
  const [url, setURL] = useState("");
  const [rows, setRows] = useState<Row[]>(() => (known ? known.map((f) => ({ name: f.name, value: slot.fields?.[f.name] ?? "", secret: f.secret })) : [{ name: "", value: "", secret: true }]));
  const [useURL, setUseURL] = useState(false);

  const adapters = props.adapters ?? [];
  const form = useSubmit(async () => {
    let body: unknown;
    if (mode === "provision") {
      body = { provision: { ...(adapterID.trim() ? { adapter_id: adapterID.trim() } : {}), ...(rotate ? { rotate_password: true } : {}) } };
    } else if (mode === "bind") {
      body = { bind: { url } };
    } else {
      const value: Record<string, string> = {};
      if (known && useURL) value.url = url;
      else for (const r of rows) if (r.name.trim() && r.value !== "") value[r.name.trim()] = r.value;
      body = { value };
    }
    let r: { slot: SlotView };
    try {
      r = await call<{ slot: SlotView }>("PUT", props.base + "/" + seg(slot.key), body);
    } finally {
      // Secret values are sent once and not kept, refused or not.
      setURL("");
      setRows((rs) => rs.map((r) => (r.secret ? { ...r, value: "" } : r)));
    }
    await props.onFilled(r.slot);
  });
  const setRow = (i: number, patch: Partial<Row>) => setRows((rs) => rs.map((r, j) => (j === i ? { ...r, ...patch } : r)));

  return (
    <section class="block panel fill" id="fill-form" aria-labelledby="fill-h">
      <h2 id="fill-h">
        Fill <code>{slot.key}</code> <span class="muted small">({slot.type})</span>
      </h2>
      <form onSubmit={form.onSubmit} aria-describedby="fill-error">
        <fieldset class="choice">
          <legend>How</legend>
          <label>
            <input type="radio" name="fill_mode" value="provision" checked={mode === "provision"} onChange={() => setMode("provision")} /> Provision it
          </label>
          <label>
            <input type="radio" name="fill_mode" value="bind" checked={mode === "bind"} onChange={() => setMode("bind")} /> Bind to a URL
          </label>
          <label>
            <input type="radio" name="fill_mode" value="value" checked={mode === "value"} onChange={() => setMode("value")} /> Give its values
          </label>
        </fieldset>

        {mode === "provision" && (
          <div class="fill-mode">
            <p class="hint">A slots adapter of type {slot.type} makes the resource. Provisioning again with the same adapter reuses it and keeps its password unless you ask for a new one.</p>
            {props.adapters ? (
              <div class="field">
                <label for="fill-adapter">Adapter</label>
                <select id="fill-adapter" name="fill_adapter" value={adapterID} onChange={(e) => setAdapterID((e.currentTarget as HTMLSelectElement).value)}>
                  <option value="">The primary slots adapter</option>
                  {adapters.map((a) => (
                    <option key={a.adapter_id} value={a.adapter_id}>
                      {a.adapter_id} ({a.kind}){a.primary ? ", primary" : ""}
                    </option>
                  ))}
                </select>
              </div>
            ) : (
              <div class="field">
                <label for="fill-adapter">Adapter ID</label>
                <input id="fill-adapter" name="fill_adapter" autocomplete="off" spellcheck={false} required={false} value={adapterID} onInput={(e) => setAdapterID((e.currentTarget as HTMLInputElement).value)} aria-describedby="fill-adapter-hint" />
                <p class="hint" id="fill-adapter-hint">
                  Leave empty for the primary slots adapter.
                </p>
              </div>
            )}
            <label class="check">
              <input type="checkbox" name="fill_rotate" checked={rotate} onChange={(e) => setRotate((e.currentTarget as HTMLInputElement).checked)} /> Draw a new password (the running app keeps
              the old one until its next deploy)
            </label>
          </div>
        )}

        {(mode === "bind" || (mode === "value" && known && useURL)) && (
          <div class="field fill-mode">
            <label for="fill-url">URL</label>
            <input id="fill-url" name="fill_url" type="password" autocomplete="off" required value={url} onInput={(e) => setURL((e.currentTarget as HTMLInputElement).value)} aria-describedby="fill-url-hint" />
            <p class="hint" id="fill-url-hint">
              {slot.type === "postgres" ? "For example postgres://app:password@db.internal:5432/app?sslmode=require. " : "An absolute URL, such as redis://cache.internal:6379. "}
              It may hold a password: it is stored encrypted and never shown.
            </p>
          </div>
        )}

        {mode === "value" && known && (
          <label class="check">
            <input type="checkbox" name="fill_use_url" checked={useURL} onChange={(e) => setUseURL((e.currentTarget as HTMLInputElement).checked)} /> Give a connection URL instead of fields
          </label>
        )}

        {mode === "value" && !(known && useURL) && (
          <div class="fill-mode fill-values">
            {!known && <p class="hint">Svc does not know the fields of type {slot.type}: every value is kept secret.</p>}
            {rows.map((r, i) => (
              <div class="value-row" key={i}>
                {known ? (
                  <label for={"fill-v-" + i}>{r.name}</label>
                ) : (
                  <>
                    <label class="visually-hidden" for={"fill-n-" + i}>
                      Field name {i + 1}
                    </label>
                    <input id={"fill-n-" + i} name={"fill_name_" + i} placeholder="field" pattern="[a-z][a-z0-9_]{0,31}" autocomplete="off" spellcheck={false} value={r.name} onInput={(e) => setRow(i, { name: (e.currentTarget as HTMLInputElement).value })} />
                  </>
                )}
                {!known && (
                  <label class="visually-hidden" for={"fill-v-" + i}>
                    Value of field {i + 1}
                  </label>
                )}
                <input
                  id={"fill-v-" + i}
                  name={"fill_" + (known ? r.name : "value_" + i)}
                  type={r.secret ? "password" : "text"}
                  autocomplete="off"
                  placeholder={r.secret ? (slot.secret_fields?.includes(r.name) ? "set; type to replace" : "") : known?.find((f) => f.name === r.name)?.hint ?? ""}
                  value={r.value}
                  onInput={(e) => setRow(i, { value: (e.currentTarget as HTMLInputElement).value })}
                />
                {r.secret && <span class="muted small">secret, write-only</span>}
              </div>
            ))}
            {!known && (
              <button type="button" class="small" onClick={() => setRows((rs) => [...rs, { name: "", value: "", secret: true }])}>
                Add a field
              </button>
            )}
          </div>
        )}
        <ErrorNote error={form.error} id="fill-error" />
        <div class="confirm-actions">
          <Submit busy={form.busy}>Fill {slot.key}</Submit>
          <button type="button" onClick={props.onCancel}>
            Cancel
          </button>
          <span class="hint">Takes effect at the app’s next deploy.</span>
        </div>
      </form>
    </section>
  );
}
