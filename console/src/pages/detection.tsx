import type { AppPageProps } from "./app";

// The detection page, /apps/<app ID>/detection: the proposal, its evidence and runners-up, the questions to answer, accept with values and secrets.

export function Detection(_props: AppPageProps) {
  return <p class="lead">Not built yet.</p>;
}
