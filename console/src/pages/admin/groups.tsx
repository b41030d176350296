import type { AdminPageProps } from "../admin";

// Groups, /admin/groups: create, members, roles.

export function Groups(_props: AdminPageProps) {
  return <p class="lead">Not built yet.</p>;
}
