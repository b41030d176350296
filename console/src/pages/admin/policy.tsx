import type { AdminPageProps } from "../admin";

// Host policy, /admin/policy: every setting (fixed ones shown as fixed), with the preview of the apps a change would block.

export function Policy(_props: AdminPageProps) {
  return <p class="lead">Not built yet.</p>;
}
