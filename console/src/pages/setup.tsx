import { useEffect, useState } from "preact/hooks";
import { call, type User } from "../api";
import { useNext } from "../next";
import { Link, navigate } from "../router";
import { Card, ErrorNote, Field, Notice, Submit, useSubmit } from "../ui";

/**
 * Setup creates the installation's first account (an administrator) and
 * signs it in, while the installation waits for one (GET /api/v1/setup);
 * afterwards it says the installation is set up.
 */
export function Setup(props: { search: string; onSignedIn: () => void }) {
  const [required, setRequired] = useState<boolean | null>(null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [username, setUsername] = useState("");
  const [displayName, setDisplayName] = useState("");
  const [password, setPassword] = useState("");
  const { next, notice } = useNext(props.search);
  useEffect(() => {
    call<{ setup_required: boolean }>("GET", "/setup").then((s) => setRequired(s.setup_required), setLoadError);
  }, []);
  const form = useSubmit(async () => {
    await call<{ user: User }>("POST", "/setup", { username, display_name: displayName, password });
    const c = await next;
    props.onSignedIn();
    if (c.kind === "ok") {
      location.assign(c.to);
    } else {
      navigate("/");
    }
  });
  if (loadError) {
    return (
      <Card title="Set up svc">
        <ErrorNote error={loadError} />
      </Card>
    );
  }
  if (required === false) {
    return (
      <Card title="svc is set up" lead="This installation already has its administrator.">
        <p>
          <Link href="/login" class="button primary">
            Sign in
          </Link>
        </p>
      </Card>
    );
  }
  return (
    <Card title="Set up svc" lead="Create the first account. It administers this installation: it can add people, share apps and set host policy.">
      {notice && <Notice>{notice}</Notice>}
      <form onSubmit={form.onSubmit} aria-busy={required === null} aria-describedby="form-error">
        <Field label="Username" name="username" autocomplete="username" value={username} onInput={setUsername} autofocus />
        <Field label="Display name" name="display_name" autocomplete="name" value={displayName} onInput={setDisplayName} />
        <Field
          label="Password"
          name="password"
          type="password"
          autocomplete="new-password"
          value={password}
          onInput={setPassword}
          hint="At least 12 characters. A passphrase of a few words is easy to type and hard to guess."
        />
        <ErrorNote error={form.error} id="form-error" />
        <Submit busy={form.busy || required === null}>Create and sign in</Submit>
      </form>
    </Card>
  );
}
