// lazy makes a component whose code is loaded on its first use (a chunk
// of the build of its own); until then it shows a quiet placeholder, and
// a failed load (a new version deployed meanwhile) says to reload.

import type { FunctionComponent } from "preact";
import { useEffect, useState } from "preact/hooks";
import { ApiError } from "./api";
import { ErrorNote } from "./ui";

export function lazy<P>(load: () => Promise<FunctionComponent<P>>): FunctionComponent<P> {
  let loaded: FunctionComponent<P> | null = null;
  let pending: Promise<FunctionComponent<P>> | null = null;
  return function Lazy(props: P) {
    const [, setTick] = useState(0);
    const [error, setError] = useState<unknown>(null);
    useEffect(() => {
      if (loaded) return;
      pending ??= load();
      pending.then(
        (c) => {
          loaded = c;
          setTick((n) => n + 1);
        },
        () => {
          pending = null;
          setError(new ApiError(0, "NETWORK", "This page of the console could not be loaded.", "Reload the page."));
        },
      );
    }, []);
    if (loaded) {
      const C = loaded;
      return <C {...(props as P & object)} />;
    }
    return error ? <ErrorNote error={error} /> : <p class="visually-hidden" role="status">Loading…</p>;
  };
}
