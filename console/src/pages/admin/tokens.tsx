import type { AdminPageProps } from "../admin";
import { Link } from "../../router";
import { can, TokenManager } from "./people";

// Service tokens, /admin/tokens: the installation's own principals for
// scripts and services (GET and POST /api/v1/tokens/service), each secret
// shown once at creation; revoke (DELETE /api/v1/tokens/{id}). Listing and
// minting need install.tokens.manage: without it the page shows the API's
// refusal.

export function Tokens(props: AdminPageProps) {
  return (
    <section>
      <h1>Service tokens</h1>
      <p class="lead">
        A service token is its own principal: it holds only what is shared with it (on an app’s Sharing page) and outlives the person who made it. Tokens that act as
        you are on <Link href="/account/tokens">your tokens</Link> page.
      </p>
      <TokenManager kind="service" canManage={can(props.me, "install.tokens.manage")} />
    </section>
  );
}
