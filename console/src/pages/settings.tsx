import type { AppPageProps } from "./app";

// An app's settings, /apps/<app ID>/settings: name and slug, tile image, delete with the backup decision.

export function Settings(_props: AppPageProps) {
  return <p class="lead">Not built yet.</p>;
}
