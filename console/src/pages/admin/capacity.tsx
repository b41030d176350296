import type { AdminPageProps } from "../admin";

// Capacity, /admin/capacity: what the host has and what the apps hold.

export function Capacity(_props: AdminPageProps) {
  return <p class="lead">Not built yet.</p>;
}
