import type { AppPageProps } from "./app";

// The secrets, /apps/<app ID>/secrets: names, origins and versions; set; read a value where permitted (audited).

export function Secrets(_props: AppPageProps) {
  return <p class="lead">Not built yet.</p>;
}
