import type { AdminPageProps } from "../admin";

// The audit log, /admin/audit: every entry, with every filter.

export function Audit(_props: AdminPageProps) {
  return <p class="lead">Not built yet.</p>;
}
