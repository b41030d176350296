import { useEffect, useState } from "preact/hooks";
import { call, seg } from "../api";
import { useNext } from "../next";
import { Card, ErrorNote, Field, Notice, Submit, useSubmit } from "../ui";

/**
 * Passcode admits this browser to an app shared with everyone behind a
 * passcode (POST /api/v1/apps/{appID}/passcode), then goes to next. Any
 * other app is NOT_FOUND, as the API says.
 */
export function Passcode(props: { appID: string; search: string }) {
  const [name, setName] = useState<string | null>(null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [passcode, setPasscode] = useState("");
  const [admitted, setAdmitted] = useState(false);
  const { next, notice } = useNext(props.search);
  useEffect(() => {
    call<{ name: string }>("GET", "/apps/" + seg(props.appID) + "/passcode").then((a) => setName(a.name), setLoadError);
  }, [props.appID]);
  const form = useSubmit(async () => {
    await call("POST", "/apps/" + seg(props.appID) + "/passcode", { passcode });
    setAdmitted(true);
    const c = await next;
    if (c.kind === "ok") {
      location.assign(c.to);
    }
  });
  if (loadError) {
    return (
      <Card title="No such app">
        <ErrorNote error={loadError} />
      </Card>
    );
  }
  return (
    <Card title={name ?? "An app"} lead="This app asks for its passcode. Whoever shared it with you knows it.">
      {notice && <Notice>{notice}</Notice>}
      <form onSubmit={form.onSubmit} aria-busy={name === null} aria-describedby="form-error">
        <Field label="Passcode" name="passcode" type="password" autocomplete="off" value={passcode} onInput={setPasscode} autofocus />
        <ErrorNote error={form.error} id="form-error" />
        <p class="status" role="status" aria-live="polite">
          {admitted ? "The passcode admits this browser for a day." : ""}
        </p>
        <Submit busy={form.busy || name === null}>Open</Submit>
      </form>
    </Card>
  );
}
