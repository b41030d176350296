import type { AppPageProps } from "./app";

// The volumes, /apps/<app ID>/volumes: the app's storage; declare one.

export function Volumes(_props: AppPageProps) {
  return <p class="lead">Not built yet.</p>;
}
