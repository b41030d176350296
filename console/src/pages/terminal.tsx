import type { AppPageProps } from "./app";

// The terminal, /apps/<app ID>/terminal: a shell in a running workload over the exec websocket, where permitted.

export function Terminal(_props: AppPageProps) {
  return <p class="lead">Not built yet.</p>;
}
