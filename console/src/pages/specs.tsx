import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { call } from "../api";
import { Link, navigate } from "../router";
import { Confirm, ErrorNote, Notice, when } from "../ui";
import type { AppPageProps } from "./app";
import { effectSays, problemsOf, specsPath, syntaxProblems, toYAML, useRevisions, type DiffResult, type Effect, type Problem, type SpecList, type SpecSummary, type SpecView } from "./specdoc";
import "./specs.css";

// The spec revisions, /apps/<app ID>/spec[/…]:
//   /spec                the revisions, newest first (GET …/specs, paged),
//                        which is pinned, and a picker to compare two;
//   /spec/<rev>          one revision in full (GET …/specs/{rev}) as YAML,
//                        with Edit, Pin (POST …/specs/{rev}/pin, confirmed),
//                        Plan and Deploy;
//   /spec/new            a new revision written as YAML from the latest,
//   /spec/<rev>/edit     … or from that revision (POST …/specs, Content-Type
//                        application/yaml); a refusal's problems are shown
//                        at their field and line in the editor;
//   /spec/<a>/diff/<b>   what a deploy of b over a would rebuild, restart or
//                        leave alone (GET …/specs/{a}/diff/{b}).

export function Specs(props: AppPageProps) {
  const { appID, rest } = props;
  const base = "/apps/" + appID + "/spec";
  if (rest.length === 0 || rest[0] === "") return <RevisionList appID={appID} base={base} />;
  if (rest[0] === "new" && rest.length === 1) return <Editor key="new" appID={appID} base={base} from={null} onChanged={props.onChanged} />;
  const n = revNumber(rest[0]);
  if (n !== null && rest.length === 1) return <RevisionPage key={n} appID={appID} base={base} rev={n} onChanged={props.onChanged} />;
  if (n !== null && rest.length === 2 && rest[1] === "edit") return <Editor key={"edit-" + n} appID={appID} base={base} from={n} onChanged={props.onChanged} />;
  const b = revNumber(rest[2] ?? "");
  if (n !== null && b !== null && rest.length === 3 && rest[1] === "diff") return <DiffPage key={n + "-" + b} appID={appID} base={base} a={n} b={b} />;
  return (
    <p class="lead">
      This app has no spec page “{rest.join("/")}”. See <Link href={base}>its revisions</Link>.
    </p>
  );
}

function revNumber(s: string): number | null {
  return /^[1-9][0-9]{0,15}$/.test(s) ? Number(s) : null;
}

/** RevisionList is /spec: the revisions, and a picker to compare two. */
function RevisionList(props: { appID: string; base: string }) {
  const { appID, base } = props;
  const r = useRevisions(appID);
  return (
    <div class="specs">
      <div class="actions">
        <Link href={base + "/new"} class="button primary">
          New revision
        </Link>
        <span class="hint">Write the next revision as YAML, starting from the latest. Writing one neither pins nor deploys it.</span>
      </div>
      <ErrorNote error={r.error} />
      <DiffPicker appID={appID} base={base} items={r.items} pinned={r.pinned} />
      <section aria-labelledby="revisions-h" class="block">
        <h2 id="revisions-h">Revisions</h2>
        <p class="muted small pinned-line" data-pinned={r.pinned ?? ""}>
          {r.items === null ? (
            " "
          ) : r.pinned ? (
            <>
              Revision {r.pinned} is pinned: the reconciler keeps the app at it and the next deploy ships it.
            </>
          ) : (
            "No revision is pinned: pin one to make it what the next deploy ships."
          )}
        </p>
        {r.items === null ? (
          <table class="list revisions" aria-busy="true" data-table="revisions-loading">
            <caption class="visually-hidden">Reading revisions…</caption>
            <RevisionHead />
            <tbody>
              {[0, 1, 2].map((i) => (
                <tr key={i} class="skeleton-row">
                  <td>&nbsp;</td>
                  <td>&nbsp;</td>
                  <td>&nbsp;</td>
                  <td>&nbsp;</td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : r.items.length === 0 ? (
          <div class="empty-state small">
            <p>
              No revisions yet. Upload the app’s source and accept detection’s proposal on the <Link href={"/apps/" + appID + "/detection"}>Detection</Link> page, or
              write one with <Link href={base + "/new"}>New revision</Link>.
            </p>
          </div>
        ) : (
          <table class="list revisions" data-table="revisions">
            <caption class="visually-hidden">Spec revisions, newest first</caption>
            <RevisionHead />
            <tbody>
              {r.items.map((s) => (
                <tr key={s.revision} data-revision={s.revision} class={s.pinned ? "selected" : ""}>
                  <th scope="row">
                    <Link href={base + "/" + s.revision}>Revision {s.revision}</Link>
                    {s.pinned && <span class="badge">pinned</span>}
                  </th>
                  <td>{when(s.created_at)}</td>
                  <td>
                    <code>{s.created_by}</code>
                  </td>
                  <td>
                    <Link href={base + "/" + s.revision + "/edit"}>
                      Edit<span class="visually-hidden"> from revision {s.revision}</span>
                    </Link>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {r.cursor && (
          <p>
            <button type="button" onClick={r.more} disabled={r.busy} aria-busy={r.busy}>
              Show older revisions
            </button>
          </p>
        )}
      </section>
    </div>
  );
}

function RevisionHead() {
  return (
    <thead>
      <tr>
        <th scope="col">Revision</th>
        <th scope="col">Written</th>
        <th scope="col">By</th>
        <th scope="col">
          <span class="visually-hidden">Actions</span>
        </th>
      </tr>
    </thead>
  );
}

/** DiffPicker chooses two revisions to compare. */
function DiffPicker(props: { appID: string; base: string; items: SpecSummary[] | null; pinned: number | null; a?: number; b?: number }) {
  const items = props.items ?? [];
  const newest = items[0]?.revision;
  const defaultA = props.a ?? props.pinned ?? items[1]?.revision ?? newest;
  const [a, setA] = useState<string>("");
  const [b, setB] = useState<string>("");
  const from = a || (defaultA ? String(defaultA) : "");
  const defaultB = props.b ?? newest;
  const to = b || (defaultB ? String(defaultB) : "");
  const options = items.map((s) => (
    <option key={s.revision} value={String(s.revision)}>
      {s.revision}
      {s.pinned ? " (pinned)" : ""}
    </option>
  ));
  // A revision the list has not reached yet (an older page) is still offered.
  const extra = (n?: number) =>
    n && !items.some((s) => s.revision === n) ? (
      <option key={"x" + n} value={String(n)}>
        {n}
      </option>
    ) : null;
  return (
    <form
      class="inline-form diff-picker panel"
      aria-labelledby="compare-h"
      onSubmit={(e) => {
        e.preventDefault();
        if (from && to) navigate(props.base + "/" + from + "/diff/" + to);
      }}
    >
      <h2 id="compare-h" class="inline-h">
        Compare
      </h2>
      <label for="diff-from">From revision</label>
      <select id="diff-from" name="diff_from" value={from} disabled={items.length === 0} onChange={(e) => setA((e.currentTarget as HTMLSelectElement).value)}>
        {extra(props.a)}
        {options}
      </select>
      <label for="diff-to">to revision</label>
      <select id="diff-to" name="diff_to" value={to} disabled={items.length === 0} onChange={(e) => setB((e.currentTarget as HTMLSelectElement).value)}>
        {extra(props.b)}
        {options}
      </select>
      <button type="submit" disabled={!from || !to}>
        Compare
      </button>
      <span class="hint">What a deploy of the second over the first would rebuild, restart or leave alone.</span>
    </form>
  );
}

/** RevisionPage is /spec/<rev>: one revision as YAML, and what to do with it. */
function RevisionPage(props: { appID: string; base: string; rev: number; onChanged: () => Promise<void> }) {
  const { appID, base, rev } = props;
  const [view, setView] = useState<SpecView | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [pinnedNow, setPinnedNow] = useState(false);
  const [pinned, setPinned] = useState<number | null>(null);
  const [yaml, setYAML] = useState("");
  const load = useCallback(async () => {
    try {
      const [v, l] = await Promise.all([call<{ spec: SpecView }>("GET", specsPath(appID) + "/" + rev), call<SpecList>("GET", specsPath(appID) + "?limit=1")]);
      setYAML(await toYAML(v.spec.spec));
      setView(v.spec);
      setPinned(l.pinned_revision);
    } catch (e) {
      setError(e);
    }
  }, [appID, rev]);
  useEffect(() => {
    load();
  }, [load]);
  const pin = async () => {
    setAsking(false);
    setBusy(true);
    setError(null);
    try {
      const v = await call<{ spec: SpecView }>("POST", specsPath(appID) + "/" + rev + "/pin");
      setView(v.spec);
      setPinned(v.spec.revision);
      setPinnedNow(true);
      await props.onChanged();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="specs spec-view">
      <p class="crumb">
        <Link href={base}>All revisions</Link>
      </p>
      <section aria-labelledby="rev-h" class="block" data-revision={rev}>
        <h2 id="rev-h">
          Revision {rev} {view?.pinned && <span class="badge">pinned</span>}
        </h2>
        <dl class="facts">
          <dt>Written</dt>
          <dd>{view ? when(view.created_at) : "…"}</dd>
          <dt>By</dt>
          <dd>{view ? <code>{view.created_by}</code> : "…"}</dd>
          <dt>Pinned</dt>
          <dd>{view ? (view.pinned ? "yes: the reconciler’s target and the next deploy’s" : pinned ? "no (revision " + pinned + " is)" : "no (none is)") : "…"}</dd>
          <dt>When idle</dt>
          <dd>{view ? idleSays(view.spec) : "…"}</dd>
        </dl>
        <div class="actions">
          <Link href={base + "/" + rev + "/edit"} class="button primary">
            Edit
          </Link>
          <button type="button" disabled={!view || view.pinned || busy} aria-busy={busy} onClick={() => setAsking(true)}>
            Pin
          </button>
          <Link href={"/apps/" + appID + "/plan?revision=" + rev} class="button">
            Plan
          </Link>
          {view?.pinned && (
            <Link href={"/apps/" + appID + "/deploys"} class="button">
              Deploy…
            </Link>
          )}
          {pinned && pinned !== rev && (
            <Link href={base + "/" + pinned + "/diff/" + rev} class="button">
              Compare with pinned {pinned}
            </Link>
          )}
          {rev > 1 && (
            <Link href={base + "/" + (rev - 1) + "/diff/" + rev} class="button">
              Compare with {rev - 1}
            </Link>
          )}
        </div>
        {asking && (
          <Confirm title={"Pin revision " + rev + "?"} action={"Pin revision " + rev} onConfirm={pin} onCancel={() => setAsking(false)}>
            <p>
              Revision {rev} becomes the reconciler’s target and what the next deploy ships{pinned ? " in place of revision " + pinned : ""}. Nothing running changes until then; a
              running app whose workloads stop is brought back at the revision it runs.
            </p>
          </Confirm>
        )}
        <ErrorNote error={error} />
        {pinnedNow && (
          <Notice>
            Revision {rev} is pinned. <Link href={"/apps/" + appID + "/deploys"}>Deploy it</Link> from the Deploys page (Deploy ships the pinned revision), or first{" "}
            <Link href={"/apps/" + appID + "/plan?revision=" + rev}>see its plan</Link>.
          </Notice>
        )}
        {view && !view.pinned && !pinnedNow && (
          <p class="muted small">Not pinned: deploys and the reconciler use {pinned ? "revision " + pinned : "no revision yet"}. Pin it to make it the next deploy’s.</p>
        )}
        <h3 id="yaml-h">Document</h3>
        {view ? (
          <pre class="yaml" tabIndex={0} aria-labelledby="yaml-h" data-yaml>
            {yaml}
          </pre>
        ) : (
          <pre class="yaml placeholder" aria-busy="true">
            Reading revision {rev}…
          </pre>
        )}
      </section>
    </div>
  );
}

/** Editor writes a new revision as YAML, from the latest or from one. */
function Editor(props: { appID: string; base: string; from: number | null; onChanged: () => Promise<void> }) {
  const { appID, base } = props;
  const [text, setText] = useState<string | null>(null);
  const [from, setFrom] = useState<number | null>(props.from);
  const [error, setError] = useState<unknown>(null);
  const [problems, setProblems] = useState<Problem[]>([]);
  const [syntax, setSyntax] = useState<Problem[]>([]);
  const [busy, setBusy] = useState(false);
  const area = useRef<HTMLTextAreaElement>(null);
  const gutter = useRef<HTMLDivElement>(null);

  useEffect(() => {
    (async () => {
      try {
        let n = props.from;
        if (n === null) {
          const l = await call<SpecList>("GET", specsPath(appID) + "?limit=1");
          n = l.items[0]?.revision ?? null;
        }
        setFrom(n);
        if (n === null) {
          setText("workloads:\n  web:\n    build: {kind: static, context: .}\n");
          return;
        }
        const v = await call<{ spec: SpecView }>("GET", specsPath(appID) + "/" + n);
        setText(await toYAML(v.spec.spec));
      } catch (e) {
        setError(e);
        setText("");
      }
    })();
  }, [appID, props.from]);

  // Validate the YAML's syntax as it is typed (the browser's part; the
  // server checks the rest on save).
  useEffect(() => {
    if (text === null) return;
    let live = true;
    const t = setTimeout(() => syntaxProblems(text).then((ps) => live && setSyntax(ps), () => live && setSyntax([])), 250);
    return () => {
      live = false;
      clearTimeout(t);
    };
  }, [text]);

  const shown = problems.length > 0 ? problems : syntax;
  const bad = new Set(shown.map((p) => p.line).filter((l): l is number => !!l));
  const lines = (text ?? "").split("\n").length;

  const jump = (line: number) => {
    const el = area.current;
    if (!el || text === null) return;
    const starts = [0];
    for (let i = 0; i < text.length; i++) if (text[i] === "\n") starts.push(i + 1);
    const start = starts[line - 1] ?? text.length;
    const end = line < starts.length ? starts[line] - 1 : text.length;
    el.focus();
    el.setSelectionRange(start, end);
    const lh = parseFloat(getComputedStyle(el).lineHeight) || 20;
    el.scrollTop = Math.max(0, (line - 1) * lh - el.clientHeight / 3);
    syncGutter();
  };
  const syncGutter = () => {
    if (gutter.current && area.current) gutter.current.scrollTop = area.current.scrollTop;
  };

  const save = async (e: Event) => {
    e.preventDefault();
    if (busy || text === null) return;
    setBusy(true);
    setError(null);
    setProblems([]);
    try {
      const v = await call<{ spec: SpecView }>("POST", specsPath(appID), text, "application/yaml");
      await props.onChanged();
      navigate(base + "/" + v.spec.revision);
    } catch (err) {
      setError(err);
      const ps = await problemsOf(err, text).catch(() => []);
      setProblems(ps);
      const first = ps.find((p) => p.line);
      if (first?.line) jump(first.line);
    } finally {
      setBusy(false);
    }
  };

  return (
    <div class="specs spec-edit">
      <p class="crumb">
        <Link href={base}>All revisions</Link>
      </p>
      <form onSubmit={save} class="block" aria-labelledby="edit-h">
        <h2 id="edit-h">New revision</h2>
        <p class="muted small" data-from={from ?? ""}>
          {text === null ? " " : from ? "Starting from revision " + from + ". " : "The app has no revision yet: this is its first. "}
          Saving writes the next revision; it is neither pinned nor deployed. Every field is described in docs/spec-document.md.
        </p>
        <label for="spec-yaml">The spec document (YAML)</label>
        <div class={"yaml-editor" + (shown.length > 0 ? " invalid" : "")}>
          <div class="gutter" ref={gutter} aria-hidden="true">
            {Array.from({ length: lines }, (_, i) => (
              <span key={i} class={bad.has(i + 1) ? "bad" : ""}>
                {i + 1}
              </span>
            ))}
          </div>
          <textarea
            ref={area}
            id="spec-yaml"
            name="spec_yaml"
            spellcheck={false}
            autocomplete="off"
            wrap="off"
            rows={24}
            value={text ?? ""}
            disabled={text === null}
            aria-invalid={shown.length > 0}
            aria-describedby="spec-problems"
            onInput={(e) => {
              setText((e.currentTarget as HTMLTextAreaElement).value);
              setProblems([]);
            }}
            onScroll={syncGutter}
          />
        </div>
        <div id="spec-problems" class="spec-problems" aria-live="polite">
          {shown.length > 0 && (
            <ul>
              {shown.map((p, i) => (
                <li key={i} data-field={p.field} data-line={p.line ?? ""}>
                  <span class="where">
                    {p.line ? "Line " + p.line : "The document"}
                    {p.field && p.field !== "spec" ? (
                      <>
                        , <code>{p.field}</code>
                      </>
                    ) : null}
                    :
                  </span>{" "}
                  {p.message}
                  {p.code && p.code !== "VALID_INVALID" ? (
                    <>
                      {" "}
                      <code class="small">{p.code}</code>
                    </>
                  ) : null}
                  {p.line ? (
                    <>
                      {" "}
                      <button type="button" class="small quiet" onClick={() => jump(p.line!)}>
                        Go to line {p.line}
                      </button>
                    </>
                  ) : null}
                </li>
              ))}
            </ul>
          )}
        </div>
        <ErrorNote error={error} />
        <div class="actions">
          <button type="submit" class="primary" disabled={busy || text === null} aria-busy={busy}>
            Save as a new revision
          </button>
          <Link href={from ? base + "/" + from : base} class="button">
            Cancel
          </Link>
          {syntax.length > 0 && problems.length === 0 && <span class="hint">The YAML does not read yet; saving shows what the server says.</span>}
        </div>
      </form>
    </div>
  );
}

const effectLabel: Record<Effect, string> = { rebuild: "rebuild", restart: "restart", none: "no effect" };

/** DiffPage is /spec/<a>/diff/<b>: the classified difference. */
function DiffPage(props: { appID: string; base: string; a: number; b: number }) {
  const { appID, base, a, b } = props;
  const r = useRevisions(appID, 100);
  const [diff, setDiff] = useState<DiffResult | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    call<DiffResult>("GET", specsPath(appID) + "/" + a + "/diff/" + b).then(setDiff, setError);
  }, [appID, a, b]);
  const counts = (diff?.changes ?? []).reduce<Record<string, number>>((m, c) => ((m[c.effect] = (m[c.effect] ?? 0) + 1), m), {});
  return (
    <div class="specs spec-diff">
      <p class="crumb">
        <Link href={base}>All revisions</Link>
      </p>
      <DiffPicker key={a + "-" + b} appID={appID} base={base} items={r.items} pinned={r.pinned} a={a} b={b} />
      <section aria-labelledby="diff-h" class="block" data-effect={diff?.effect ?? ""}>
        <h2 id="diff-h">
          From <Link href={base + "/" + a}>revision {a}</Link> to <Link href={base + "/" + b}>revision {b}</Link>
        </h2>
        <ErrorNote error={error} />
        <p class="diff-summary" role="status">
          {diff === null ? (
            error ? "" : "Comparing…"
          ) : diff.changes.length === 0 ? (
            "The two revisions are the same: a deploy would change nothing."
          ) : (
            <>
              A deploy of revision {b} over revision {a}: <EffectPill effect={diff.effect} />{" "}
              {diff.effect === "rebuild" ? "some workloads are built again" : diff.effect === "restart" ? "workloads restart; nothing is built again" : "nothing running restarts"}.{" "}
              <span class="muted">
                {(["rebuild", "restart", "none"] as Effect[])
                  .filter((e) => counts[e])
                  .map((e) => counts[e] + " " + (counts[e] === 1 ? "change" : "changes") + " " + effectLabel[e])
                  .join(", ")}
              </span>
            </>
          )}
        </p>
        {diff && diff.changes.length > 0 && (
          <table class="list diff" data-table="diff">
            <caption class="visually-hidden">
              Changes from revision {a} to revision {b}, by path
            </caption>
            <thead>
              <tr>
                <th scope="col">Field</th>
                <th scope="col">In {a}</th>
                <th scope="col">In {b}</th>
                <th scope="col">A deploy</th>
              </tr>
            </thead>
            <tbody>
              {diff.changes.map((c) => (
                <tr key={c.path} data-path={c.path} data-effect={c.effect}>
                  <th scope="row">
                    <code>{c.path}</code>
                  </th>
                  <td>
                    <Value v={c.from} />
                  </td>
                  <td>
                    <Value v={c.to} />
                  </td>
                  <td>
                    <EffectPill effect={c.effect} /> <span class="muted small">{effectSays[c.effect]}</span>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
    </div>
  );
}

function EffectPill(props: { effect: Effect }) {
  const cls = props.effect === "rebuild" ? "pill-bad" : props.effect === "restart" ? "pill-busy" : "pill-plain";
  return <span class={"pill " + cls}>{effectLabel[props.effect]}</span>;
}

function Value(props: { v: unknown }) {
  if (props.v === null || props.v === undefined) return <span class="muted">absent</span>;
  const s = typeof props.v === "string" ? props.v : JSON.stringify(props.v);
  return <code class="value">{s}</code>;
}

/**
 * idleSays is what a document's lifecycle does to an idle app, once the
 * revision is deployed: idle_days without a request through the app's
 * address, then idle_action (stop unless it says delete).
 */
function idleSays(doc: Record<string, unknown>): string {
  const lc = doc.lifecycle as { idle_days?: number; idle_action?: string } | undefined;
  const days = lc?.idle_days ?? 0;
  if (days <= 0) {
    return "nothing: no lifecycle.idle_days";
  }
  const what = lc?.idle_action === "delete" ? "deleted (with a final backup when it has volumes)" : "stopped until somebody starts it";
  return "once deployed, " + what + " after " + days + (days === 1 ? " day" : " days") + " without a request; the owner is warned before";
}
