// What the spec, plan and volumes pages share: the spec API's types, where
// in a document a refusal's details point (details.field, details.problems,
// details.line), and the spec document
// as YAML (the `yaml` package): written from the JSON the API answers, and
// read back to find the line of a field's path. The YAML library is a
// chunk of its own, loaded by the first page that shows or reads YAML, so
// that the other app pages do not carry it.

import type { Node } from "yaml";
import { useCallback, useEffect, useState } from "preact/hooks";
import { ApiError, call, seg } from "../api";

/** SpecSummary is a revision as GET …/specs lists it. */
export interface SpecSummary {
  id: string;
  app_id: string;
  revision: number;
  created_at: string;
  created_by: string;
  pinned: boolean;
}

/** SpecView is a revision in full (GET …/specs/{rev}). */
export interface SpecView extends SpecSummary {
  spec: Record<string, unknown>;
}

export interface SpecList {
  items: SpecSummary[];
  next_cursor?: string;
  pinned_revision: number | null;
}

export interface Change {
  path: string;
  from: unknown;
  to: unknown;
  effect: Effect;
}

export type Effect = "none" | "restart" | "rebuild";

export interface DiffResult {
  effect: Effect;
  changes: Change[];
}

/** Problem is one thing wrong with a document, where it is. */
export interface Problem {
  code: string;
  field: string;
  message: string;
  line?: number;
}

/** specsPath is the API's path of an app's revisions. */
export function specsPath(appID: string): string {
  return "/apps/" + seg(appID) + "/specs";
}

type YAML = typeof import("yaml");
let yamlLib: Promise<YAML> | null = null;

/** loadYAML loads the YAML library once (a failed load is tried again). */
export function loadYAML(): Promise<YAML> {
  yamlLib ??= import("yaml").catch((e) => {
    yamlLib = null;
    throw new ApiError(0, "NETWORK", "This page of the console could not be loaded: " + String((e as Error).message ?? e), "Reload the page.");
  });
  return yamlLib;
}

/** toYAML writes a spec document (decoded JSON) as YAML. */
export async function toYAML(doc: unknown): Promise<string> {
  const Y = await loadYAML();
  return Y.stringify(doc, { lineWidth: 0 });
}

/**
 * problemsOf reads where a refusal of a document points: every entry of
 * details.problems, else details.field (and details.line of a YAML error
 * the server met), each with its line in text when it can be found.
 */
export async function problemsOf(e: unknown, text: string): Promise<Problem[]> {
  if (!(e instanceof ApiError)) return [];
  const Y = await loadYAML();
  const d = e.details;
  const out: Problem[] = [];
  if (Array.isArray(d.problems)) {
    for (const p of d.problems as Record<string, unknown>[]) {
      if (p && typeof p.field === "string") out.push({ code: String(p.code ?? e.code), field: p.field, message: String(p.message ?? "") });
    }
  }
  if (out.length === 0 && (typeof d.field === "string" || typeof d.line === "number")) {
    out.push({ code: e.code, field: typeof d.field === "string" ? d.field : "", message: e.message, line: typeof d.line === "number" ? d.line : undefined });
  }
  return out.map((p) => (p.line ? p : { ...p, line: lineOf(Y, text, p.field) }));
}

/**
 * pathSegments splits a field's path as the API writes it
 * (workloads.web.mounts[0].path) into keys and indexes.
 */
export function pathSegments(path: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const part of path.split(".")) {
    const m = /^([^[]*)((?:\[\d+\])*)$/.exec(part);
    if (!m) {
      out.push(part);
      continue;
    }
    if (m[1]) out.push(m[1]);
    for (const ix of m[2].match(/\d+/g) ?? []) out.push(Number(ix));
  }
  return out;
}

/**
 * lineOf finds the line (from 1) of a field's path in a YAML text: the
 * line of its key, or of the deepest part of the path the text has (a
 * field left out is reported at its parent). undefined when the text
 * cannot be read or the path names the document as a whole.
 */
export function lineOf(Y: YAML, text: string, path: string): number | undefined {
  if (!path || path === "spec") return undefined;
  const { isMap, isScalar, isSeq } = Y;
  const lc = new Y.LineCounter();
  const doc = Y.parseDocument(text, { lineCounter: lc, uniqueKeys: false });
  if (doc.errors.length > 0) return undefined;
  let node: unknown = doc.contents;
  let at: number | undefined;
  for (const s of pathSegments(path)) {
    if (isMap(node) && typeof s === "string") {
      const pair = node.items.find((p) => (isScalar(p.key) ? String(p.key.value) : String(p.key)) === s);
      if (!pair) break;
      const key = pair.key as Node | null;
      if (key?.range) at = key.range[0];
      node = pair.value;
    } else if (isSeq(node) && typeof s === "number") {
      const item = node.items[s] as Node | undefined;
      if (!item) break;
      if (item.range) at = item.range[0];
      node = item;
    } else {
      break;
    }
  }
  return at === undefined ? undefined : lc.linePos(at).line;
}

/** syntaxProblems reads a YAML text as the browser can (its syntax only). */
export async function syntaxProblems(text: string): Promise<Problem[]> {
  if (text.trim() === "") return [{ code: "VALID_INVALID", field: "", message: "The document is empty: a spec has at least workloads." }];
  const Y = await loadYAML();
  const doc = Y.parseDocument(text);
  return doc.errors.map((err) => ({
    code: "VALID_INVALID",
    field: "",
    message: "YAML: " + err.message.split("\n")[0].replace(/ at line \d+, column \d+:?$/, ""),
    line: err.linePos?.[0]?.line,
  }));
}

/** workloadsOf names a document's workloads, the primary first. */
export function workloadsOf(doc: Record<string, unknown> | undefined): string[] {
  const ws = (doc?.workloads ?? {}) as Record<string, { primary?: boolean }>;
  const names = Object.keys(ws).sort();
  const only = names.length === 1;
  return names.sort((a, b) => Number(only || !!ws[b]?.primary) - Number(only || !!ws[a]?.primary) || a.localeCompare(b));
}

/** effectSays tells what a change's effect means for a deploy. */
export const effectSays: Record<Effect, string> = {
  rebuild: "rebuilds",
  restart: "restarts",
  none: "leaves running as it is",
};

const pageSize = 20;

/** useRevisions reads the revisions a page at a time, newest first. */
export function useRevisions(appID: string, limit = pageSize) {
  const [items, setItems] = useState<SpecSummary[] | null>(null);
  const [pinned, setPinned] = useState<number | null>(null);
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const load = useCallback(
    async (after?: string) => {
      setBusy(true);
      try {
        const l = await call<SpecList>("GET", specsPath(appID) + "?limit=" + limit + (after ? "&cursor=" + seg(after) : ""));
        setItems((old) => (after && old ? [...old, ...l.items] : l.items));
        setPinned(l.pinned_revision);
        setCursor(l.next_cursor);
        setError(null);
      } catch (e) {
        setError(e);
      } finally {
        setBusy(false);
      }
    },
    [appID, limit],
  );
  useEffect(() => {
    load();
  }, [load]);
  return { items, pinned, cursor, error, busy, more: () => load(cursor), reload: () => load() };
}

