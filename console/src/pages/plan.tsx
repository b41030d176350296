import type { AppPageProps } from "./app";

// The plan, /apps/<app ID>/plan: what a deploy of a revision would do and every reason it would be refused.

export function Plan(_props: AppPageProps) {
  return <p class="lead">Not built yet.</p>;
}
