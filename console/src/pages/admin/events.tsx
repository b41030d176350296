import { useEffect, useState } from "preact/hooks";
import { all, type App } from "../../api";
import { Notice } from "../../ui";
import type { AdminPageProps } from "../admin";
import { Subscriptions } from "../subscriptions";
import { may } from "./host";

// Events, /admin/events[/<subscription ID>]: every subscription the person
// manages (every one of the installation with install.events.manage, else
// their own), install-wide and apps', and making install-wide ones
// (install.events.manage; the API's refusal is shown to others).

export function EventsAdmin(props: AdminPageProps) {
  const canManage = may(props.me, "install.events.manage");
  const [appNames, setAppNames] = useState<Record<string, string>>({});
  useEffect(() => {
    all<App>("/apps").then(
      (apps) => setAppNames(Object.fromEntries(apps.map((a) => [a.id, a.name]))),
      () => setAppNames({}),
    );
  }, []);
  return (
    <div class="events-admin">
      <h1>Events</h1>
      <p class="lead">
        {canManage
          ? "Every event subscription of the installation: install-wide ones, which receive every event (sign-ins, adapters, policy, and every app’s), and those of single apps. Make an app’s subscription on the app’s Events tab."
          : "Your event subscriptions, install-wide and apps’. Make an app’s subscription on the app’s Events tab."}
      </p>
      <Subscriptions
        appID={null}
        base="/admin/events"
        selected={props.rest[0] ?? ""}
        userID={props.me.user?.id ?? null}
        appNames={appNames}
        createNote={
          canManage ? undefined : (
            <Notice>
              An install-wide subscription needs <code>install.events.manage</code>, which you do not hold: the API refuses it. Subscribe to one app’s events on its Events tab instead, or ask an
              administrator.
            </Notice>
          )
        }
        empty={
          canManage
            ? "No subscriptions yet. Choose New subscription above to have every event of the installation (or those you pick) sent to a webhook or a notification adapter; an app’s own subscriptions are made on its Events tab."
            : "You have no subscriptions. Subscribe to an app’s events on its Events tab."
        }
      />
    </div>
  );
}
