// The console's only way to the server: the public API under /api/v1, from
// this page's own origin with the session cookie (same-origin requests
// pass the server's cross-origin checks). Every refusal is an ApiError
// carrying the API's envelope: code, message, remedy, request id.

export const API = "/api/v1";

export interface User {
  id: string;
  username: string;
  display_name: string;
  email?: string;
  status: string;
  must_change_password: boolean;
  role_id: string | null;
}

export interface Me {
  user: User | null;
  verbs: string[];
}

export interface AppSummary {
  id: string;
  name: string;
  slug: string;
  state: string;
  url: string | null;
  icon_updated_at: string | null;
}

export interface Entry {
  app: AppSummary;
  favorite: boolean;
  section_id: string | null;
  passcode?: boolean;
}

export interface Section {
  id: string;
  name: string;
  position: number;
}

export interface LauncherPage {
  items: Entry[];
  next_cursor?: string;
  sections: Section[];
}

/** ApiError is a refusal of the API (or the network's failure). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly remedy: string = "",
    readonly requestId: string = "",
    /** details are the envelope's details: field (the request's field the
     * refusal is about), problems, line, … */
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }

  /** field is the request's field the refusal is about, or "". */
  get field(): string {
    return typeof this.details.field === "string" ? this.details.field : "";
  }
}

/**
 * errorFrom reads the API's error envelope from a refused answer's body;
 * a body that is not one (a proxy's page) still gives an ApiError with
 * the HTTP status.
 */
export function errorFrom(status: number, statusText: string, body: unknown): ApiError {
  if (body && typeof body === "object") {
    const e = body as Record<string, unknown>;
    if (typeof e.code === "string" && typeof e.message === "string") {
      return new ApiError(
        status,
        e.code,
        e.message,
        typeof e.remedy === "string" ? e.remedy : "",
        typeof e.request_id === "string" ? e.request_id : "",
        e.details && typeof e.details === "object" ? (e.details as Record<string, unknown>) : {},
      );
    }
  }
  return new ApiError(status, "HTTP_" + status, statusText || "the server answered " + status);
}

/**
 * call sends one request to the API and decodes its JSON answer. The body
 * is sent as JSON, or as it is when a contentType is given (a YAML
 * document, an image).
 */
export async function call<T = void>(method: string, path: string, body?: unknown, contentType?: string): Promise<T> {
  const init: RequestInit = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers = { ...init.headers, "Content-Type": contentType ?? "application/json" };
    init.body = contentType ? (body as BodyInit) : JSON.stringify(body);
  }
  let res: Response;
  try {
    res = await fetch(API + path, init);
  } catch (e) {
    throw new ApiError(0, "NETWORK", "The server could not be reached.", "Check that svc is running, then try again.");
  }
  if (res.status === 204) {
    return undefined as T;
  }
  let decoded: unknown = undefined;
  try {
    decoded = await res.json();
  } catch {
    /* not JSON */
  }
  if (!res.ok) {
    throw errorFrom(res.status, res.statusText, decoded);
  }
  return decoded as T;
}

/** seg escapes one path segment. */
export const seg = encodeURIComponent;

/** allApps reads every page of the caller's launcher. */
export async function allApps(): Promise<{ items: Entry[]; sections: Section[] }> {
  let page = await call<LauncherPage>("GET", "/me/apps?limit=500");
  const items = [...page.items];
  while (page.next_cursor) {
    page = await call<LauncherPage>("GET", "/me/apps?limit=500&cursor=" + seg(page.next_cursor));
    items.push(...page.items);
  }
  return { items, sections: page.sections ?? [] };
}

/** App is an app as GET /api/v1/apps/{appID} answers it. */
export interface App {
  id: string;
  name: string;
  slug: string;
  state: string;
  desired_state: string;
  /** Why svc itself stopped it (idle, insecure, disk_limit); null otherwise. */
  stopped_because: string | null;
  url: string | null;
  pinned: { revision: number } | null;
  created_at: string;
}

export interface Page<T> {
  items: T[];
  next_cursor?: string;
}

/** Problem is what keeps an app or a workload from serving. */
export interface Problem {
  code: string;
  message: string;
  remedy?: string;
  deployment_id?: string;
  workload?: string;
}

export interface WorkloadReport {
  primary: boolean;
  running: boolean;
  restarts: number;
  health: string;
  exit_code: number | null;
  address?: string;
  problem?: Problem;
}

export interface Status {
  state: string;
  desired_state: string;
  deployment_id: string | null;
  revision: number | null;
  workloads: Record<string, WorkloadReport> | null;
  problem: Problem | null;
}

export interface Limits {
  cpu_millis: number;
  memory_bytes: number;
  disk_bytes: number;
}

export interface WorkloadUsage extends Limits {
  volumes: Record<string, number> | null;
  limits: Limits;
}

export interface Usage {
  supported: boolean;
  host_cpu_millis: number;
  host_memory_bytes: number;
  workloads: Record<string, WorkloadUsage> | null;
}

export interface Deployment {
  id: string;
  app_id: string;
  revision: number;
  state: string;
  trigger: string;
  error_code: string | null;
  error_message: string | null;
  created_by: string;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  approvals_required: number;
  approval_reasons: string[] | null;
  approvals: { principal_id: string; at: string }[] | null;
  rejected_reason: string | null;
  redeploys: string | null;
}

/** all reads every page of a paged list. */
export async function all<T>(path: string): Promise<T[]> {
  const sep = path.includes("?") ? "&" : "?";
  let page = await call<Page<T>>("GET", path + sep + "limit=200");
  const items = [...page.items];
  while (page.next_cursor) {
    page = await call<Page<T>>("GET", path + sep + "limit=200&cursor=" + seg(page.next_cursor));
    items.push(...page.items);
  }
  return items;
}

/** refusal reads the API's refusal of a GET (what an EventSource cannot show). */
export async function refusal(path: string): Promise<unknown> {
  try {
    await call("GET", path);
    return null;
  } catch (e) {
    return e;
  }
}

/**
 * stream reads a server-sent event stream with fetch (so that a refusal
 * before the stream opens is the API's envelope, which an EventSource
 * cannot read), calling onEvent for each event until the stream ends or
 * signal aborts. It throws the refusal (an ApiError).
 */
export async function stream(path: string, signal: AbortSignal, onEvent: (event: string, data: string) => void): Promise<void> {
  let res: Response;
  try {
    res = await fetch(API + path, { credentials: "same-origin", headers: { Accept: "text/event-stream" }, signal });
  } catch (e) {
    if (signal.aborted) return;
    throw new ApiError(0, "NETWORK", "The server could not be reached.", "Check that svc is running, then try again.");
  }
  if (!res.ok || !res.body) {
    let decoded: unknown = undefined;
    try {
      decoded = await res.json();
    } catch {
      /* not JSON */
    }
    throw errorFrom(res.status, res.statusText, decoded);
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let event = "message";
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, "");
        buf = buf.slice(nl + 1);
        if (line === "") {
          if (data.length > 0) onEvent(event, data.join("\n"));
          event = "message";
          data = [];
        } else if (line.startsWith("event:")) {
          event = line.slice(6).trim();
        } else if (line.startsWith("data:")) {
          data.push(line.slice(5).replace(/^ /, ""));
        }
      }
    }
  } catch (e) {
    if (signal.aborted) return;
    throw new ApiError(0, "NETWORK", "The stream was cut off.", "Try again.");
  }
}
