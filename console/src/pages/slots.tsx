import type { AppPageProps } from "./app";

// The slots, /apps/<app ID>/slots: what the app needs and what fills each; fill one.

export function Slots(_props: AppPageProps) {
  return <p class="lead">Not built yet.</p>;
}
