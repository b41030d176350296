import type { AdminPageProps } from "../admin";

// Service tokens, /admin/tokens: create, revoke.

export function Tokens(_props: AdminPageProps) {
  return <p class="lead">Not built yet.</p>;
}
