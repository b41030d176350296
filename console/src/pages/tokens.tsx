import { TokenManager } from "./admin/people";

// The signed-in person's own tokens, /account/tokens: delegated tokens
// that act as them (GET and POST /api/v1/tokens; the secret shown once),
// revoked with DELETE /api/v1/tokens/{id}. Own tokens need no verb.

export function OwnTokens() {
  return (
    <section>
      <h1>Your tokens</h1>
      <p class="lead">A token acts as you, bounded by what you may do now: for the CLI (svc login --token), scripts and AI assistants. It ends with your account.</p>
      <TokenManager kind="own" canManage />
    </section>
  );
}
