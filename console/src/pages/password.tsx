import { useMemo, useState } from "preact/hooks";
import { ApiError, call, type Me } from "../api";
import { checkNext } from "../next";
import { navigate } from "../router";
import { Card, ErrorNote, Field, Submit, useSubmit } from "../ui";

/**
 * Password changes the person's own password (POST /api/v1/me/password,
 * which ends their other sessions). When the account must change its
 * password the API refuses everything else, so this page is all the
 * console shows until it is done, and then it goes to next.
 */
export function Password(props: { me: Me; search: string; onChanged: () => void }) {
  const forced = props.me.user?.must_change_password ?? false;
  const [current, setCurrent] = useState("");
  const [fresh, setFresh] = useState("");
  const [again, setAgain] = useState("");
  const [done, setDone] = useState(false);
  const next = useMemo(() => checkNext(props.search), [props.search]);
  const form = useSubmit(async () => {
    setDone(false);
    if (fresh !== again) {
      throw new ApiError(0, "VALID_INVALID", "The two new passwords differ", "Type the same new password twice.");
    }
    await call("POST", "/me/password", { current_password: current, new_password: fresh });
    setCurrent("");
    setFresh("");
    setAgain("");
    setDone(true);
    props.onChanged();
    if (forced) {
      const c = await next;
      if (c.kind === "ok") {
        location.assign(c.to);
      } else {
        navigate("/");
      }
    }
  });
  const body = (
    <form onSubmit={form.onSubmit} aria-describedby="form-error">
      <Field label="Current password" name="current_password" type="password" autocomplete="current-password" value={current} onInput={setCurrent} autofocus={forced} />
      <Field
        label="New password"
        name="new_password"
        type="password"
        autocomplete="new-password"
        value={fresh}
        onInput={setFresh}
        hint="At least 12 characters, not your username."
      />
      <Field label="New password again" name="new_password_again" type="password" autocomplete="new-password" value={again} onInput={setAgain} />
      <ErrorNote error={form.error} id="form-error" />
      <p class="status" role="status" aria-live="polite">
        {done ? "Your password is changed. Your other sessions have ended." : ""}
      </p>
      <Submit busy={form.busy}>Change password</Submit>
    </form>
  );
  if (forced) {
    return (
      <Card title="Choose a new password" lead="Your account must change its password before you go on.">
        {body}
      </Card>
    );
  }
  return (
    <section class="narrow">
      <h1>Change your password</h1>
      <p class="lead">Signing in elsewhere ends when you change it: every other session of yours is signed out.</p>
      {body}
    </section>
  );
}
