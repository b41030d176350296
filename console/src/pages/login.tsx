import { useState } from "preact/hooks";
import { call, type User } from "../api";
import { passNext, useNext } from "../next";
import { navigate } from "../router";
import { Card, ErrorNote, Field, Notice, Submit, useSubmit } from "../ui";

/**
 * Login signs in (POST /api/v1/sessions) and then goes to next where the
 * server allows it, to the forced password change first when the account
 * must change its password, else to the launcher.
 */
export function Login(props: { search: string; onSignedIn: () => void }) {
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const { next, notice } = useNext(props.search);
  const form = useSubmit(async () => {
    const r = await call<{ user: User }>("POST", "/sessions", { username, password });
    props.onSignedIn();
    if (r.user.must_change_password) {
      navigate(passNext("/account/password", props.search));
      return;
    }
    const c = await next;
    if (c.kind === "ok") {
      location.assign(c.to);
    } else {
      navigate("/");
    }
  });
  return (
    <Card title="Sign in">
      {notice && <Notice>{notice}</Notice>}
      <form onSubmit={form.onSubmit} aria-describedby="form-error">
        <Field label="Username" name="username" autocomplete="username" value={username} onInput={setUsername} autofocus />
        <Field label="Password" name="password" type="password" autocomplete="current-password" value={password} onInput={setPassword} />
        <ErrorNote error={form.error} id="form-error" />
        <Submit busy={form.busy}>Sign in</Submit>
      </form>
    </Card>
  );
}
