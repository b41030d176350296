import type { AdminPageProps } from "../admin";

// Adapters, /admin/adapters: kinds, settings, write-only credentials, restart needed.

export function Adapters(_props: AdminPageProps) {
  return <p class="lead">Not built yet.</p>;
}
