// The console's entry: which page the address names, who is signed in
// (GET /api/v1/me), and the rules that send a person elsewhere: to setup on
// an installation without an administrator, to sign-in (and back) when
// not signed in, to the forced password change when the account must
// change its password.

import { render } from "preact";
import { useCallback, useEffect, useState } from "preact/hooks";
import { ApiError, call, type Me } from "./api";
import { Launcher, prefetchLauncher } from "./pages/launcher";
import { NotFound } from "./pages/notfound";
import { Login } from "./pages/login";
import { Passcode } from "./pages/passcode";
import { Password } from "./pages/password";
import { Setup } from "./pages/setup";
import { lazy } from "./lazy";
import { navigate, useLocation } from "./router";
import { Card, ErrorNote, Shell } from "./ui";
import "./style.css";

// The app pages are a chunk of their own, loaded when first shown: the
// launcher and sign-in do not carry them.
const AppList = lazy(() => import("./pages/apps").then((m) => m.AppList));
const AppPages = lazy(() => import("./pages/app").then((m) => m.AppPages));
const NewApp = lazy(() => import("./pages/newapp").then((m) => m.NewApp));
const AdminPages = lazy(() => import("./pages/admin").then((m) => m.AdminPages));
const OwnTokens = lazy(() => import("./pages/tokens").then((m) => m.OwnTokens));

function isPublic(path: string): boolean {
  return path === "/login" || path === "/setup" || /^\/passcode\/[^/]+$/.test(path);
}

function App() {
  const { path, search } = useLocation();
  // undefined: not known yet; null: not signed in.
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  const [meError, setMeError] = useState<unknown>(null);
  const forget = useCallback(() => setMe(undefined), []);

  useEffect(() => {
    if (isPublic(path) || me !== undefined) return;
    // The launcher's data comes with the answer to who is signed in.
    if (path === "/") prefetchLauncher();
    let live = true;
    (async () => {
      try {
        const m = await call<Me>("GET", "/me");
        if (live) setMe(m);
      } catch (e) {
        if (!live) return;
        if (!(e instanceof ApiError) || e.status !== 401) {
          setMeError(e);
          return;
        }
        setMe(null);
        const s = await call<{ setup_required: boolean }>("GET", "/setup").catch(() => ({ setup_required: false }));
        if (s.setup_required) {
          navigate("/setup", true);
        } else {
          const here = path + search;
          navigate(here === "/" ? "/login" : "/login?next=" + encodeURIComponent(here), true);
        }
      }
    })();
    return () => {
      live = false;
    };
  }, [path, search, me]);

  const mustChange = !!me?.user?.must_change_password;
  useEffect(() => {
    if (mustChange && !isPublic(path) && path !== "/account/password") {
      const here = path + search;
      navigate("/account/password" + (here === "/" ? "" : "?next=" + encodeURIComponent(here)), true);
    }
  }, [mustChange, path, search]);

  const signOut = async () => {
    try {
      await call("DELETE", "/sessions");
    } catch {
      /* signed out already */
    }
    setMe(null);
    navigate("/login");
  };

  if (path === "/login") return <Login search={search} onSignedIn={forget} />;
  if (path === "/setup") return <Setup search={search} onSignedIn={forget} />;
  const pc = /^\/passcode\/([^/]+)$/.exec(path);
  if (pc) return <Passcode appID={decodeURIComponent(pc[1])} search={search} />;

  if (meError) {
    return (
      <Card title="svc">
        <ErrorNote error={meError} />
      </Card>
    );
  }
  if (!me) {
    return <Loading />;
  }
  if (path === "/account/password") {
    const page = <Password me={me} search={search} onChanged={forget} />;
    return mustChange ? (
      page
    ) : (
      <Shell me={me} title="Password" current="account" onSignOut={signOut}>
        {page}
      </Shell>
    );
  }
  if (mustChange) return <Loading />;
  let title = "Apps";
  let current: "launcher" | "apps" | "admin" | "account" = "launcher";
  let page;
  const app = /^\/apps\/([^/]+)\/?(.*)$/.exec(path);
  if (path === "/") {
    page = <Launcher />;
  } else if (path === "/apps" || path === "/apps/") {
    current = "apps";
    page = <AppList />;
  } else if (app) {
    current = "apps";
    title = "";
    page = <AppPages appID={decodeURIComponent(app[1])} rest={app[2].split("/").filter((p) => p !== "").map(decodeURIComponent)} />;
  } else if (path === "/new") {
    title = "New app";
    current = "apps";
    page = <NewApp />;
  } else if (path === "/account/tokens") {
    title = "Your tokens";
    current = "account";
    page = <OwnTokens />;
  } else if (path === "/admin" || path.startsWith("/admin/")) {
    title = "";
    current = "admin";
    page = <AdminPages me={me} rest={path.slice("/admin".length).split("/").filter((p) => p !== "").map(decodeURIComponent)} />;
  } else {
    title = "Not found";
    page = <NotFound />;
  }
  return (
    <Shell me={me} title={title} current={current} onSignOut={signOut}>
      {page}
    </Shell>
  );
}

/** Loading holds the shell's place while the console asks who is signed in. */
function Loading() {
  return (
    <div class="shell" aria-busy="true">
      <header class="top">
        <span class="brand">svc</span>
      </header>
      <main id="main" class="content">
        <p class="visually-hidden" role="status">
          Loading…
        </p>
      </main>
    </div>
  );
}

render(<App />, document.getElementById("app")!);
