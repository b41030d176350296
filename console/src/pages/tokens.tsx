// The signed-in person's own tokens, /account/tokens: create, revoke.

export function OwnTokens() {
  return <p class="lead">Not built yet.</p>;
}
