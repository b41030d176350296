import type { AdminPageProps } from "../admin";

// Configuration, /admin/config: the installation's configuration.

export function Config(_props: AdminPageProps) {
  return <p class="lead">Not built yet.</p>;
}
