// Helpers shared by the installation's host pages (adapters, policy, audit,
// configuration, capacity): who may do what, every page of a paged list
// with the list's own top-level fields, and readable figures.

import { call, seg, type Me } from "../../api";

/** may says whether the signed-in person holds verb (the API decides; this only chooses what to offer). */
export function may(me: Me, verb: string): boolean {
  return me.verbs.includes(verb);
}

/**
 * pages reads every page of a list paged with limit and cursor, returning
 * its items and the first page's other fields (restart_needed, categories…).
 */
export async function pages<T, P extends { items: T[]; next_cursor?: string }>(path: string): Promise<P> {
  const sep = path.includes("?") ? "&" : "?";
  const first = await call<P>("GET", path + sep + "limit=200");
  const items = [...first.items];
  let page: P = first;
  while (page.next_cursor) {
    page = await call<P>("GET", path + sep + "limit=200&cursor=" + seg(page.next_cursor));
    items.push(...page.items);
  }
  return { ...first, items, next_cursor: undefined };
}


/** cores is thousandths of a core as cores. */
export function cores(m: number): string {
  return (m / 1000).toFixed(m % 1000 === 0 ? 0 : m < 100 ? 3 : 2) + (m === 1000 ? " core" : " cores");
}

/** pct is part of whole as a whole percentage (0 when whole is 0). */
export function pct(part: number, whole: number): number {
  return whole > 0 ? Math.min(100, Math.round((part / whole) * 100)) : 0;
}

/** ConfigSetting is one startup setting as GET /api/v1/config lists it. */
export interface ConfigSetting {
  name: string;
  env: string;
  value?: string;
  origin: "environment" | "config_file" | "default";
  secret?: boolean;
}

/** FixedEntry is a policy setting fixed at startup. */
export interface FixedEntry {
  name: string;
  value: unknown;
  origin: "environment" | "config_file";
}

export interface ConfigAnswer {
  settings: ConfigSetting[];
  policy_fixed: FixedEntry[];
}

/** origins names where a value came from, in words. */
export const origins: Record<string, string> = {
  environment: "environment",
  config_file: "configuration file",
  default: "default",
};

/** Capacity is GET /api/v1/capacity. */
export interface Capacity {
  host: { cpu_millis: number; memory_bytes: number };
  committed: { cpu_millis: number; memory_bytes: number; apps: number; unlimited_workloads: number };
  free: { cpu_millis: number; memory_bytes: number };
  ports: { start: number; end: number; used: number; free: number };
}
