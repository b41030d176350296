// The console's building blocks: the two layouts (a card for the pages
// before sign-in, the shell with its header for the rest), form fields,
// and the one way errors are shown (the API's message, remedy and code, in
// a live region so a screen reader says them).

import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, type Me } from "./api";
import { Link } from "./router";

/** useTitle names the document after the page. */
export function useTitle(title: string, on = true): void {
  useEffect(() => {
    if (on) document.title = title ? title + " · svc" : "svc";
  }, [title, on]);
}

/** Card is the layout of the pages before sign-in. */
export function Card(props: { title: string; lead?: ComponentChildren; children?: ComponentChildren }) {
  useTitle(props.title);
  return (
    <div class="card-page">
      <main class="card" id="main">
        <p class="brand" aria-hidden="true">
          svc
        </p>
        <h1>{props.title}</h1>
        {props.lead && <p class="lead">{props.lead}</p>}
        {props.children}
      </main>
    </div>
  );
}

/** Shell is the layout of every page of a signed-in person. */
export function Shell(props: { me: Me; title: string; current: "launcher" | "apps" | "admin" | "account"; onSignOut: () => void; children: ComponentChildren }) {
  // A page that names itself (an app's) leaves the title empty here.
  useTitle(props.title, props.title !== "");
  const u = props.me.user;
  const admin = props.me.verbs.includes("install.view");
  return (
    <div class="shell">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <Link href="/" class="brand">
          svc
        </Link>
        <nav aria-label="Main">
          <ul>
            <li>
              <Link href="/" aria-current={props.current === "launcher" ? "page" : undefined}>
                Launcher
              </Link>
            </li>
            <li>
              <Link href="/apps" aria-current={props.current === "apps" ? "page" : undefined}>
                Apps
              </Link>
            </li>
            {admin && (
              <li>
                <Link href="/admin/" aria-current={props.current === "admin" ? "page" : undefined}>
                  Admin
                </Link>
              </li>
            )}
          </ul>
        </nav>
        <div class="person">
          <Link href="/account/password" class="who" aria-current={props.current === "account" && location.pathname === "/account/password" ? "page" : undefined} title="Change your password">
            {u ? u.display_name || u.username : "token"}
          </Link>
          <Link href="/account/tokens" class="tokens-link" aria-current={props.current === "account" && location.pathname === "/account/tokens" ? "page" : undefined} title="Your API tokens">
            Tokens
          </Link>
          <button type="button" class="quiet" onClick={props.onSignOut}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" class="content">
        {props.children}
      </main>
    </div>
  );
}

/** ErrorNote shows a refusal: what the API said, its remedy, its code. */
export function ErrorNote(props: { error: unknown; id?: string }) {
  const e = props.error;
  return (
    <div class="status" id={props.id} role="alert" aria-live="assertive">
      {e instanceof ApiError ? (
        <div class="error">
          <p class="msg">{sentence(e.message)}</p>
          {e.remedy && <p class="remedy">{sentence(e.remedy)}</p>}
          <p class="code">
            <code>{e.code}</code>
            {e.requestId && <span> · request {e.requestId}</span>}
          </p>
        </div>
      ) : e ? (
        <div class="error">
          <p class="msg">{String((e as Error).message || e)}</p>
        </div>
      ) : null}
    </div>
  );
}

/** Notice is a remark that is not an error (a next not followed). */
export function Notice(props: { children: ComponentChildren }) {
  return (
    <p class="notice" role="status">
      {props.children}
    </p>
  );
}

function sentence(s: string): string {
  if (!s) return s;
  const t = s.charAt(0).toUpperCase() + s.slice(1);
  return /[.!?]$/.test(t) ? t : t + ".";
}

/** Field is a labelled input. */
export function Field(props: {
  label: string;
  name: string;
  type?: string;
  autocomplete?: string;
  value: string;
  onInput: (v: string) => void;
  hint?: string;
  autofocus?: boolean;
  required?: boolean;
  minLength?: number;
}) {
  const ref = useRef<HTMLInputElement>(null);
  useEffect(() => {
    if (props.autofocus) ref.current?.focus();
  }, []);
  const id = "f-" + props.name;
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <input
        ref={ref}
        id={id}
        name={props.name}
        type={props.type ?? "text"}
        autocomplete={props.autocomplete}
        value={props.value}
        required={props.required ?? true}
        minLength={props.minLength}
        aria-describedby={props.hint ? id + "-hint" : undefined}
        onInput={(e) => props.onInput((e.currentTarget as HTMLInputElement).value)}
      />
      {props.hint && (
        <p class="hint" id={id + "-hint"}>
          {props.hint}
        </p>
      )}
    </div>
  );
}

/** useSubmit runs a form's action once at a time and keeps its error. */
export function useSubmit(action: () => Promise<void>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const onSubmit = async (e: Event) => {
    e.preventDefault();
    if (busy) return;
    setBusy(true);
    setError(null);
    try {
      await action();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, setError, onSubmit };
}

/** Submit is a form's button, saying when the form is at work. */
export function Submit(props: { busy: boolean; children: ComponentChildren }) {
  return (
    <button type="submit" class="primary" disabled={props.busy} aria-busy={props.busy}>
      {props.children}
    </button>
  );
}

/**
 * Confirm asks before an action that changes a running app: a modal
 * dialog (focus moves into it and returns; Escape cancels) naming what
 * will happen, with the action's button and Cancel.
 */
export function Confirm(props: { title: string; children: ComponentChildren; action: string; danger?: boolean; onConfirm: () => void; onCancel: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
    return () => d?.close();
  }, []);
  return (
    <dialog ref={ref} class="confirm" aria-labelledby="confirm-title" onCancel={(e) => (e.preventDefault(), props.onCancel())}>
      <h2 id="confirm-title">{props.title}</h2>
      <div class="confirm-body">{props.children}</div>
      <div class="confirm-actions">
        <button type="button" class={props.danger ? "danger" : "primary"} onClick={props.onConfirm}>
          {props.action}
        </button>
        <button type="button" onClick={props.onCancel} autofocus>
          Cancel
        </button>
      </div>
    </dialog>
  );
}

/** ProblemNote shows what keeps an app or a workload from serving. */
export function ProblemNote(props: { problem: { code: string; message: string; remedy?: string } }) {
  const p = props.problem;
  return (
    <div class="error problem">
      <p class="msg">{sentence(p.message)}</p>
      {p.remedy && <p class="remedy">{sentence(p.remedy)}</p>}
      <p class="code">
        <code>{p.code}</code>
      </p>
    </div>
  );
}

/** usePoll runs load now and every ms milliseconds while the page shows. */
export function usePoll(load: () => Promise<void>, ms: number, deps: unknown[]): void {
  useEffect(() => {
    let live = true;
    let timer = 0;
    const tick = async () => {
      try {
        await load();
      } catch {
        /* load shows its own errors */
      } finally {
        if (live) timer = window.setTimeout(tick, ms);
      }
    };
    tick();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, deps);
}

/** when says when an instant was, in the reader's locale, to the second. */
export function when(iso: string | null | undefined): string {
  if (!iso) return "—";
  const d = new Date(iso);
  return isNaN(d.getTime()) ? iso : d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
}

/**
 * ListTable is a table of the list style: its columns (an empty name is
 * the row actions' column, named for screen readers only) and its rows
 * (children or rows), or a placeholder row of the same height while rows
 * is null. A fixed table keeps its columns' widths as rows arrive.
 */
export function ListTable(props: { name: string; caption: string; columns: string[]; rows?: ComponentChildren | null; children?: ComponentChildren; fixed?: boolean }) {
  const body = props.children ?? props.rows;
  return (
    <table class={props.fixed ? "list fixed" : "list"} data-table={props.name}>
      <caption class="visually-hidden">{props.caption}</caption>
      <thead>
        <tr>
          {props.columns.map((c, i) => (
            <th scope="col" key={i}>
              {c || <span class="visually-hidden">Actions</span>}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {body ?? (
          <tr class="skeleton-row" aria-hidden="true">
            {props.columns.map((_, i) => (
              <td key={i}>&nbsp;</td>
            ))}
          </tr>
        )}
      </tbody>
    </table>
  );
}

/** bytes is a byte count in binary units. */
export function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return (i === 0 ? String(v) : v.toFixed(v < 10 ? 1 : 0)) + " " + units[i];
}

/**
 * SecretOnce shows a secret the API returns once (a token's, a generated
 * password): readable, selectable, with a copy button, until the person
 * says they have kept it. hint says what svc keeps of it.
 */
export function SecretOnce(props: { title: string; value: string; name: string; hint?: string; children?: ComponentChildren; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  const ref = useRef<HTMLInputElement>(null);
  useEffect(() => {
    ref.current?.focus();
    ref.current?.select();
  }, [props.value]);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.value);
      setCopied(true);
    } catch {
      ref.current?.select();
    }
  };
  const id = "secret-" + props.name;
  return (
    <div class="panel secret-once" role="group" aria-labelledby={id + "-h"} data-secret={props.name}>
      <h3 id={id + "-h"}>{props.title}</h3>
      {props.children}
      <div class="secret-row">
        <label for={id} class="visually-hidden">
          {props.title}
        </label>
        <input id={id} ref={ref} name={props.name} readOnly value={props.value} spellcheck={false} autocomplete="off" />
        <button type="button" onClick={copy}>
          Copy
        </button>
        <button type="button" class="quiet" onClick={props.onDone}>
          Done, hide it
        </button>
      </div>
      <p class="hint" role="status" aria-live="polite">
        {copied ? "Copied." : (props.hint ?? "It is shown only now: svc keeps only a hash of it.")}
      </p>
    </div>
  );
}
