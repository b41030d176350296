import type { AppPageProps } from "./app";

// The spec revisions, /apps/<app ID>/spec[/<rev>…]: the list, one revision, editing as YAML with validation at the field, the diff of two, pin.

export function Specs(_props: AppPageProps) {
  return <p class="lead">Not built yet.</p>;
}
