import type { FunctionComponent } from "preact";
import type { Me } from "../api";
import { Link } from "../router";
import { useTitle } from "../ui";
import { Accounts } from "./admin/accounts";
import { Adapters } from "./admin/adapters";
import { Audit } from "./admin/audit";
import { Capacity } from "./admin/capacity";
import { Config } from "./admin/config";
import { EventsAdmin } from "./admin/events";
import { Groups } from "./admin/groups";
import { Policy } from "./admin/policy";
import { Roles } from "./admin/roles";
import { Storage } from "./admin/storage";
import { Tokens } from "./admin/tokens";
import { UpgradePage } from "./admin/upgrade";

// The installation's pages, /admin/<page>/…: a side list of the pages and
// the one the address names. Shown to those holding install.view; each
// page shows the API's refusal of what the person may not do.

/** AdminPageProps is what every installation page is given: who is signed
 * in (their verbs say what to offer) and the path after the page's name. */
export interface AdminPageProps {
  me: Me;
  rest: string[];
}

const pages: { sub: string; label: string; page: FunctionComponent<AdminPageProps> }[] = [
  { sub: "accounts", label: "Accounts", page: Accounts },
  { sub: "groups", label: "Groups", page: Groups },
  { sub: "roles", label: "Roles", page: Roles },
  { sub: "tokens", label: "Service tokens", page: Tokens },
  { sub: "adapters", label: "Adapters", page: Adapters },
  { sub: "policy", label: "Host policy", page: Policy },
  { sub: "audit", label: "Audit log", page: Audit },
  { sub: "events", label: "Events", page: EventsAdmin },
  { sub: "config", label: "Configuration", page: Config },
  { sub: "capacity", label: "Capacity", page: Capacity },
  { sub: "storage", label: "Storage", page: Storage },
  { sub: "upgrade", label: "Upgrade", page: UpgradePage },
];

export function AdminPages(props: { me: Me; rest: string[] }) {
  const sub = props.rest[0] || "accounts";
  const found = pages.find((p) => p.sub === sub);
  useTitle((found ? found.label : "No such page") + " · Admin");
  const P = found?.page;
  return (
    <div class="admin">
      <nav class="side" aria-label="Installation">
        <ul>
          {pages.map((p) => (
            <li key={p.sub}>
              <Link href={"/admin/" + p.sub} aria-current={p.sub === sub ? "page" : undefined}>
                {p.label}
              </Link>
            </li>
          ))}
        </ul>
      </nav>
      <div class="admin-page">{P ? <P me={props.me} rest={props.rest.slice(1)} /> : <p class="lead">The installation has no page “{sub}”.</p>}</div>
    </div>
  );
}
