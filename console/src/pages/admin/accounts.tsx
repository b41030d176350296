import type { AdminPageProps } from "../admin";

// Accounts, /admin/accounts: create, reset a password, suspend, installation roles.

export function Accounts(_props: AdminPageProps) {
  return <p class="lead">Not built yet.</p>;
}
