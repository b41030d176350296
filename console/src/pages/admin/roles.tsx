import type { AdminPageProps } from "../admin";

// Roles and verbs, /admin/roles: the built-in and custom roles and what each verb allows.

export function Roles(_props: AdminPageProps) {
  return <p class="lead">Not built yet.</p>;
}
