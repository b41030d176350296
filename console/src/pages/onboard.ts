// What the onboarding pages (/new and an app's detection page) share: the
// detection record's types as GET /api/v1/apps/{appID}/detection answers
// them, and send, a request through XMLHttpRequest, which (unlike fetch)
// reports an upload's progress.

import { API, ApiError, errorFrom, seg } from "../api";

export interface Evidence {
  path: string;
  reason: string;
}

/** EnvDoc is an environment value: a literal, a slot's field or a secret. */
export type EnvDoc = string | { secret: string } | { slot: string; field: string };

export interface WorkloadDoc {
  primary?: boolean;
  build?: { kind: string; context?: string; command?: string; dockerfile?: string; image?: string };
  run: { command?: string[]; port?: number; health?: { path: string } };
  env?: Record<string, EnvDoc>;
  mounts?: { volume: string; path: string }[];
  depends_on?: string[];
}

export interface SpecDoc {
  env?: Record<string, EnvDoc>;
  workloads: Record<string, WorkloadDoc>;
  volumes?: Record<string, { size_bytes: number }>;
  slots?: Record<string, { type: string; required?: boolean }>;
  runtime?: { adapter?: string; isolation?: string };
}

export interface Bid {
  detector: string;
  score: number;
  evidence: Evidence[] | null;
  proposal: SpecDoc;
  rejected?: { service?: string; construct?: string; reason?: string }[];
}

export interface Question {
  key: string;
  prompt: string;
  kind: string; // string, int, bool or secret
  default?: string;
}

export interface DetectionRecord {
  app_id: string;
  status: string; // pending, running, done or failed
  commit: string;
  checkout_id?: string;
  winner: Bid | null;
  runners_up: Bid[];
  questions: Question[];
  answers: Record<string, string>;
  error?: string;
  duration_ms: number;
  updated_at: string;
}

export interface Change {
  path: string;
  from: unknown;
  to: unknown;
  effect: string;
}

export interface DiffResult {
  effect: string;
  changes: Change[] | null;
}

/** AppSource is the app's source as GET /api/v1/apps/{appID} has it. */
export interface AppSource {
  kind: string;
  repository?: string;
  ref?: string;
  commit?: string;
  subdir?: string;
  checkout_id?: string;
}

/**
 * send makes one request under /api/v1 with XMLHttpRequest: body is sent
 * as it is with contentType (JSON when body is a plain object), and
 * onProgress hears how much of it has gone. It resolves to the decoded
 * answer and rejects with an ApiError.
 */
export function send<T>(method: string, path: string, body: unknown, onProgress?: (sent: number, total: number) => void, contentType = ""): Promise<T> {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open(method, API + path);
    x.withCredentials = true;
    x.setRequestHeader("Accept", "application/json");
    let payload: XMLHttpRequestBodyInit | null = null;
    if (body instanceof Blob) {
      payload = body;
      x.setRequestHeader("Content-Type", contentType || "application/octet-stream");
    } else if (body !== undefined) {
      payload = JSON.stringify(body);
      x.setRequestHeader("Content-Type", "application/json");
    }
    if (onProgress) {
      x.upload.onprogress = (e) => onProgress(e.loaded, e.lengthComputable ? e.total : 0);
    }
    x.onerror = () => reject(new ApiError(0, "NETWORK", "The server could not be reached, or it closed the connection.", "Check that svc is running, then try again."));
    x.onload = () => {
      let decoded: unknown = undefined;
      try {
        decoded = x.responseText ? JSON.parse(x.responseText) : undefined;
      } catch {
        /* not JSON */
      }
      if (x.status >= 200 && x.status < 300) {
        resolve(decoded as T);
        return;
      }
      reject(errorFrom(x.status, x.statusText, decoded));
    };
    x.send(payload);
  });
}

/** archiveType is the Content-Type of an archive by its file name, or "". */
export function archiveType(name: string): string {
  const n = name.toLowerCase();
  if (n.endsWith(".tar.gz") || n.endsWith(".tgz")) return "application/gzip";
  if (n.endsWith(".tar")) return "application/x-tar";
  if (n.endsWith(".zip")) return "application/zip";
  return "";
}

/** uploadArchive sends an archive as the app's source (POST …/source). */
export function uploadArchive(appID: string, file: File, onProgress: (sent: number, total: number) => void): Promise<{ checkout_id: string }> {
  return send<{ checkout_id: string }>("POST", "/apps/" + seg(appID) + "/source", file, onProgress, archiveType(file.name));
}
