import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { allApps, API, call, seg, type Entry, type Me, type Section } from "../api";
import { Link } from "../router";
import { ErrorNote } from "../ui";
import "./launcher.css";

// The launcher: the apps the person can open (GET /api/v1/me/apps) as
// tiles, favorites first, then the person's named sections (collapsible;
// which are collapsed is kept in this browser), then the rest; a search
// over names and slugs; a menu on each tile to pin it or file it (the
// keyboard's way), and dragging a tile onto a section to file it there
// (onto "Other apps" to take it out of its section; onto Favorites to pin
// it).
//
// The launcher's data is asked for while the console asks who is signed
// in (prefetchLauncher, called by main.tsx on /), not after.

/** dragType is the drag data's type of a tile (its app's ID). */
const dragType = "application/x-svc-app";

type Launch = { items: Entry[]; sections: Section[] };

let early: { read: Promise<Launch>; at: number } | null = null;

/** prefetchLauncher starts reading the launcher before it is shown. */
export function prefetchLauncher(): void {
  early = { read: allApps(), at: Date.now() };
  early.read.catch(() => {
    /* read again when shown */
  });
}

/**
 * firstLoad is the prefetched read (once, and only while it is fresh: the
 * person may have gone elsewhere before the launcher showed), else a new
 * one.
 */
function firstLoad(): Promise<Launch> {
  const e = early;
  early = null;
  return e && Date.now() - e.at < 10_000 ? e.read.catch(() => allApps()) : allApps();
}

const collapsedKey = "svc.launcher.collapsed";

function loadCollapsed(): Set<string> {
  try {
    return new Set(JSON.parse(localStorage.getItem(collapsedKey) ?? "[]") as string[]);
  } catch {
    return new Set();
  }
}

/** matches says whether an app answers the search (name or slug). */
export function matches(e: Entry, query: string): boolean {
  const q = query.trim().toLowerCase();
  return q === "" || e.app.name.toLowerCase().includes(q) || e.app.slug.toLowerCase().includes(q);
}

export function Launcher() {
  const [items, setItems] = useState<Entry[] | null>(null);
  const [sections, setSections] = useState<Section[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [query, setQuery] = useState("");
  const [collapsed, setCollapsed] = useState(loadCollapsed);
  const [newSection, setNewSection] = useState("");

  const show = useCallback((v: Launch) => {
    setItems(v.items);
    setSections([...v.sections].sort((a, b) => a.position - b.position));
  }, []);
  const reload = useCallback(async () => show(await allApps()), [show]);
  useEffect(() => {
    firstLoad().then(show).catch(setError);
  }, [show]);

  // act runs a change through the API and shows the launcher as it is then.
  const act = useCallback(
    async (method: string, path: string, body?: unknown) => {
      setError(null);
      try {
        await call(method, path, body);
        await reload();
      } catch (e) {
        setError(e);
      }
    },
    [reload],
  );

  const toggle = (id: string) => {
    const c = new Set(collapsed);
    if (c.has(id)) c.delete(id);
    else c.add(id);
    setCollapsed(c);
    localStorage.setItem(collapsedKey, JSON.stringify([...c]));
  };

  const shown = (items ?? []).filter((e) => matches(e, query));
  const favorites = shown.filter((e) => e.favorite);
  const filed = new Set(sections.map((s) => s.id));
  const rest = shown.filter((e) => !e.section_id || !filed.has(e.section_id));
  const byID = new Map((items ?? []).map((e) => [e.app.id, e]));
  const entry = (id: string) => byID.get(id);

  return (
    <div class="launcher">
      <div class="toolbar">
        <h1>Apps</h1>
        <div class="search">
          <label for="search" class="visually-hidden">
            Search apps
          </label>
          <input id="search" name="search" type="search" placeholder="Search apps" value={query} onInput={(e) => setQuery((e.currentTarget as HTMLInputElement).value)} autocomplete="off" />
        </div>
        <form
          class="new-section"
          onSubmit={(e) => {
            e.preventDefault();
            if (newSection.trim() === "") return;
            act("POST", "/me/sections", { name: newSection.trim() }).then(() => setNewSection(""));
          }}
        >
          <label for="new-section" class="visually-hidden">
            New section name
          </label>
          <input id="new-section" name="new-section" placeholder="New section" value={newSection} onInput={(e) => setNewSection((e.currentTarget as HTMLInputElement).value)} autocomplete="off" />
          <button type="submit">Add section</button>
        </form>
      </div>
      <ErrorNote error={error} />
      {items === null ? (
        <Skeleton />
      ) : items.length === 0 ? (
        <Empty />
      ) : (
        <>
          <p class="visually-hidden" role="status" aria-live="polite">
            {query ? `${shown.length} of ${items.length} apps match` : ""}
          </p>
          {shown.length === 0 && <p class="empty">No app matches “{query.trim()}”.</p>}
          {favorites.length > 0 && <Group id="favorites" title="Favorites" entries={favorites} sections={sections} act={act} entry={entry} />}
          {sections.map((s) => {
            const es = shown.filter((e) => e.section_id === s.id);
            if (query && es.length === 0) return null;
            return (
              <Group
                key={s.id}
                id={s.id}
                title={s.name}
                entries={es}
                sections={sections}
                act={act}
                entry={entry}
                section={s}
                collapsed={collapsed.has(s.id)}
                onToggle={() => toggle(s.id)}
              />
            );
          })}
          {rest.length > 0 && <Group id="other" title={sections.length > 0 || favorites.length > 0 ? "Other apps" : "All apps"} entries={rest} sections={sections} act={act} entry={entry} />}
        </>
      )}
    </div>
  );
}

type Act = (method: string, path: string, body?: unknown) => Promise<void>;

/**
 * dropAction is what dropping the app on a group does: file it in the
 * section, take it out of its section ("other"), pin it ("favorites");
 * null when it is already so.
 */
export function dropAction(group: string, e: Entry | undefined): [string, string] | null {
  if (!e) return null;
  const app = seg(e.app.id);
  if (group === "favorites") return e.favorite ? null : ["PUT", "/me/favorites/" + app];
  if (group === "other") return e.section_id ? ["DELETE", "/me/sections/" + seg(e.section_id) + "/apps/" + app] : null;
  return e.section_id === group ? null : ["PUT", "/me/sections/" + seg(group) + "/apps/" + app];
}

function Group(props: {
  id: string;
  title: string;
  entries: Entry[];
  sections: Section[];
  act: Act;
  entry: (appID: string) => Entry | undefined;
  section?: Section;
  collapsed?: boolean;
  onToggle?: () => void;
}) {
  const [renaming, setRenaming] = useState(false);
  const [name, setName] = useState(props.title);
  const [over, setOver] = useState(false);
  const nameRef = useRef<HTMLInputElement>(null);
  // Renaming starts in the name, selected: typing replaces it.
  useEffect(() => {
    if (renaming) {
      nameRef.current?.focus();
      nameRef.current?.select();
    }
  }, [renaming]);
  const s = props.section;
  const headId = "group-" + props.id;
  // A tile dragged over the group: the group takes it (dragover cancelled)
  // unless the drag is something else.
  const accepts = (e: DragEvent) => !!e.dataTransfer && [...e.dataTransfer.types].includes(dragType);
  const drag = {
    onDragOver: (e: DragEvent) => {
      if (!accepts(e)) return;
      e.preventDefault();
      e.dataTransfer!.dropEffect = "move";
      setOver(true);
    },
    onDragLeave: (e: DragEvent) => {
      if (!(e.currentTarget as Element).contains(e.relatedTarget as Node | null)) setOver(false);
    },
    onDrop: (e: DragEvent) => {
      setOver(false);
      if (!accepts(e)) return;
      e.preventDefault();
      const a = dropAction(props.id, props.entry(e.dataTransfer!.getData(dragType)));
      if (a) props.act(a[0], a[1]);
    },
  };
  return (
    <section class={"group" + (over ? " drop-over" : "")} aria-labelledby={headId} data-group={props.id} {...drag}>
      <div class="group-head">
        {s ? (
          <h2 id={headId}>
            <button type="button" class="disclosure" aria-expanded={!props.collapsed} aria-controls={headId + "-tiles"} onClick={props.onToggle}>
              <span class="chevron" aria-hidden="true" />
              {props.title} <span class="count">({props.entries.length})</span>
            </button>
          </h2>
        ) : (
          <h2 id={headId}>
            {props.title} <span class="count">({props.entries.length})</span>
          </h2>
        )}
        {s && !renaming && (
          <span class="group-actions">
            <button
              type="button"
              class="quiet small"
              onClick={() => {
                setName(s.name);
                setRenaming(true);
              }}
            >
              Rename<span class="visually-hidden"> section {s.name}</span>
            </button>
            <button type="button" class="quiet small" onClick={() => props.act("DELETE", "/me/sections/" + seg(s.id))}>
              Delete<span class="visually-hidden"> section {s.name}</span>
            </button>
          </span>
        )}
        {s && renaming && (
          <form
            class="rename"
            onSubmit={(e) => {
              e.preventDefault();
              props.act("PATCH", "/me/sections/" + seg(s.id), { name: name.trim() }).then(() => setRenaming(false));
            }}
          >
            <label for={headId + "-name"} class="visually-hidden">
              Section name
            </label>
            <input ref={nameRef} id={headId + "-name"} value={name} onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)} />
            <button type="submit" class="small">
              Save
            </button>
            <button type="button" class="quiet small" onClick={() => setRenaming(false)}>
              Cancel
            </button>
          </form>
        )}
      </div>
      {!props.collapsed &&
        (props.entries.length === 0 ? (
          <p class="empty small" id={headId + "-tiles"}>
            No apps here yet: drag a tile here, or file one with its tile’s menu (⋯).
          </p>
        ) : (
          <ul class="tiles" id={headId + "-tiles"}>
            {props.entries.map((e) => (
              <Tile key={e.app.id} entry={e} sections={props.sections} act={props.act} />
            ))}
          </ul>
        ))}
    </section>
  );
}

function Tile(props: { entry: Entry; sections: Section[]; act: Act }) {
  const { app, favorite, section_id } = props.entry;
  const [open, setOpen] = useState(false);
  // The API gives a generated image when the app has none; an app the
  // person cannot load it for yet (a passcode to give) shows its initial.
  const [broken, setBroken] = useState(false);
  const menuRef = useRef<HTMLUListElement>(null);
  const buttonRef = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (open) menuRef.current?.querySelector<HTMLButtonElement>("button")?.focus();
  }, [open]);
  const close = () => {
    setOpen(false);
    buttonRef.current?.focus();
  };
  const icon = API + "/apps/" + seg(app.id) + "/icon" + (app.icon_updated_at ? "?v=" + seg(app.icon_updated_at) : "");
  const inner = (
    <>
      {broken ? (
        <span class={"letter hue-" + (hash(app.id) % 6)} aria-hidden="true">
          {(app.name.trim()[0] ?? "?").toUpperCase()}
        </span>
      ) : (
        <img src={icon} alt="" width={48} height={48} decoding="async" onError={() => setBroken(true)} />
      )}
      <span class="name">{app.name}</span>
      <span class="meta">
        <span class={"state state-" + app.state}>{app.state}</span>
        {props.entry.passcode && <span class="badge">passcode</span>}
      </span>
    </>
  );
  const file = (method: string, sectionID: string) => {
    setOpen(false);
    // The tile moves to its new group (a new element there): the focus
    // follows it to its menu button.
    const to = method === "PUT" ? sectionID : "other";
    props.act(method, "/me/sections/" + seg(sectionID) + "/apps/" + seg(app.id)).then(() => {
      const moved = document.querySelector<HTMLButtonElement>(`[data-group="${CSS.escape(to)}"] .tile[data-app="${CSS.escape(app.id)}"] button.more`);
      (moved ?? buttonRef.current)?.focus();
    });
  };
  return (
    <li
      class="tile"
      data-app={app.id}
      draggable
      onDragStart={(e) => {
        if (!e.dataTransfer) return;
        e.dataTransfer.setData(dragType, app.id);
        e.dataTransfer.setData("text/plain", app.name);
        e.dataTransfer.effectAllowed = "move";
      }}
    >
      {app.url ? (
        <a class="open" href={app.url}>
          {inner}
        </a>
      ) : (
        <div class="open unavailable" title="This app has no address yet: it is not deployed, or not running">
          {inner}
        </div>
      )}
      <div class="tile-actions">
        <button
          type="button"
          class={"icon fav" + (favorite ? " on" : "")}
          aria-pressed={favorite}
          aria-label={"Favorite " + app.name}
          onClick={() => props.act(favorite ? "DELETE" : "PUT", "/me/favorites/" + seg(app.id))}
        >
          <span aria-hidden="true">{favorite ? "★" : "☆"}</span>
        </button>
        <button
          ref={buttonRef}
          type="button"
          class="icon more"
          aria-haspopup="menu"
          aria-expanded={open}
          aria-label={"File " + app.name + " in a section"}
          onClick={() => setOpen(!open)}
        >
          <span aria-hidden="true">⋯</span>
        </button>
      </div>
      {open && (
        <ul
          class="menu"
          role="menu"
          ref={menuRef}
          aria-label={"File " + app.name}
          onKeyDown={(e) => {
            const items = [...(menuRef.current?.querySelectorAll<HTMLButtonElement>("button") ?? [])];
            const i = items.indexOf(document.activeElement as HTMLButtonElement);
            if (e.key === "Escape") {
              e.preventDefault();
              close();
            } else if (e.key === "ArrowDown" || e.key === "ArrowUp") {
              e.preventDefault();
              const n = items.length;
              items[(i + (e.key === "ArrowDown" ? 1 : n - 1)) % n]?.focus();
            }
          }}
        >
          {props.sections.length === 0 && (
            <li role="none" class="menu-note">
              No sections yet: add one above.
            </li>
          )}
          {props.sections.map((s) => (
            <li role="none" key={s.id}>
              <button type="button" role="menuitemradio" aria-checked={s.id === section_id} onClick={() => file("PUT", s.id)}>
                {s.name}
              </button>
            </li>
          ))}
          {section_id && (
            <li role="none">
              <button type="button" role="menuitem" onClick={() => file("DELETE", section_id)}>
                Not in a section
              </button>
            </li>
          )}
          <li role="none">
            <button type="button" role="menuitem" onClick={close}>
              Cancel
            </button>
          </li>
        </ul>
      )}
    </li>
  );
}

function hash(s: string): number {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) >>> 0;
  return h;
}

function Skeleton() {
  return (
    <section class="group" aria-busy="true" aria-label="Loading apps">
      <div class="group-head">
        <h2 class="skeleton-text">Loading apps…</h2>
      </div>
      <ul class="tiles">
        {Array.from({ length: 8 }, (_, i) => (
          <li class="tile skeleton" key={i} aria-hidden="true" />
        ))}
      </ul>
    </section>
  );
}

/**
 * Empty is the launcher without apps: to one who may create apps
 * (app.create), a link to the new-app page; to everyone, how apps come.
 */
function Empty() {
  // Asked only here: the launcher needs the verbs only when it is empty.
  const [me, setMe] = useState<Me | null>(null);
  useEffect(() => {
    call<Me>("GET", "/me").then(setMe, () => undefined);
  }, []);
  const creates = !!me?.verbs.includes("app.create");
  return (
    <div class="empty-state">
      <h2>No apps yet</h2>
      <p>Apps you create, and apps people share with you, appear here.</p>
      {/* One line, the same height whatever /me says: nothing moves. */}
      <p class="empty-next" aria-busy={me === null}>
        {me === null ? (
          "\u00a0"
        ) : creates ? (
          <Link href="/new" class="button primary">
            Create an app
          </Link>
        ) : (
          "Ask someone who administers an app to share it with you, or an administrator for the right to create apps."
        )}
      </p>
      <p>Or launch one from a directory with the command-line client:</p>
      <pre>
        <code>svc launch samples/go-hello</code>
      </pre>
      <p>
        or through the API: <code>POST /api/v1/apps</code> (the reference is at <a href={API + "/reference"}>/api/v1/reference</a>).
      </p>
    </div>
  );
}
