// Where a page (sign-in, passcode, setup, the forced password change) may
// send the browser once it is done: only where the server says (GET
// /api/v1/edge/next, the edge's one rule: a path of this console, or an
// address of one of this installation's apps). A next the server refuses
// is not followed, and the page says why.

import { useEffect, useMemo, useState } from "preact/hooks";
import { call, seg } from "./api";

export type NextCheck =
  | { kind: "none" }
  | { kind: "ok"; to: string }
  | { kind: "refused"; why: string };

/** nextParams returns the next parameters of a query string. */
export function nextParams(search: string): string[] {
  return new URLSearchParams(search).getAll("next");
}

/**
 * looksLikeOwnPath is the console's own first look at a next, before it
 * asks the server: a path, not //host, no backslash (browsers read \ as /).
 * The server's answer decides; this only keeps a refused next from ever
 * being tried should the server be unreachable.
 */
export function looksLikeOwnPath(next: string): boolean {
  return next.startsWith("/") && !next.startsWith("//") && !next.includes("\\");
}

/** checkNext asks the server where the page's next may lead. */
export async function checkNext(search: string): Promise<NextCheck> {
  const nexts = nextParams(search);
  if (nexts.length === 0) {
    return { kind: "none" };
  }
  if (nexts.length > 1) {
    return { kind: "refused", why: "This page was given more than one next address; it follows none." };
  }
  try {
    const r = await call<{ next: string }>("GET", "/edge/next?next=" + seg(nexts[0]));
    if (!looksLikeOwnPath(r.next) && !/^https?:\/\//.test(r.next)) {
      return { kind: "refused", why: "The next address is not followed." };
    }
    return { kind: "ok", to: r.next };
  } catch (e) {
    return { kind: "refused", why: "The next address is not followed: " + (e as Error).message + "." };
  }
}

/** passNext carries a page's next on to another page's address. */
export function passNext(path: string, search: string): string {
  const nexts = nextParams(search);
  return nexts.length === 1 ? path + "?next=" + encodeURIComponent(nexts[0]) : path;
}

/**
 * useNext checks a page's next once, giving the check (to await before
 * going on) and the notice to show while a next is refused.
 */
export function useNext(search: string): { next: Promise<NextCheck>; notice: string } {
  const next = useMemo(() => checkNext(search), [search]);
  const [notice, setNotice] = useState("");
  useEffect(() => {
    next.then((c) => setNotice(c.kind === "refused" ? c.why : ""));
  }, [next]);
  return { next, notice };
}
