import type { AppPageProps } from "./app";

// Sharing, /apps/<app ID>/sharing: who can open the app and who administers it; share with users, groups, tokens or everyone (with a passcode).

export function Sharing(_props: AppPageProps) {
  return <p class="lead">Not built yet.</p>;
}
