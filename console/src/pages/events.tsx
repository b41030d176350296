import { useEffect, useState } from "preact/hooks";
import { call, type Me } from "../api";
import type { AppPageProps } from "./app";
import { Subscriptions } from "./subscriptions";

// An app's Events tab, /apps/<app ID>/events[/<subscription ID>]: the
// subscriptions to the app's events the person manages (their own, or
// every one with install.events.manage), making one (app.view on the app
// is enough), and the one the address names with its delivery log.

export function Events(props: AppPageProps) {
  const { appID } = props;
  const [userID, setUserID] = useState<string | null>(null);
  useEffect(() => {
    call<Me>("GET", "/me").then(
      (m) => setUserID(m.user?.id ?? null),
      () => setUserID(null),
    );
  }, []);
  return (
    <div class="events-page">
      <p class="lead">
        Have svc tell a system or a person when something happens to this app: a deploy fails, a secret changes, the app stops. Each event is sent to a webhook of yours, signed, or through a
        notification adapter, and every attempt is kept in the delivery log.
      </p>
      <Subscriptions
        appID={appID}
        base={"/apps/" + appID + "/events"}
        selected={props.rest[0] ?? ""}
        userID={userID}
        empty="No subscriptions to this app’s events yet. Choose New subscription above, pick the events (deploy.failed, or all deploy events), and give your webhook’s address: svc sends a test event at once, and shows its signing key once."
      />
    </div>
  );
}
