import type { ComponentChildren } from "preact";
import { useCallback, useState } from "preact/hooks";
import { all } from "../api";

// What the secrets, slots and sharing pages share: a list read whole from
// the API, shown as a placeholder of the same size while it is read, an
// empty state saying what to do next when it is empty, else a table.

/** useList reads every page of a paged list at path; load reads it again. */
export function useList<T>(path: string) {
  const [items, setItems] = useState<T[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const load = useCallback(async () => {
    try {
      setItems(await all<T>(path));
      setError(null);
    } catch (e) {
      setError(e);
    }
  }, [path]);
  return { items, setItems, error, setError, load };
}

/** Listed shows a list being read, empty, or its table. */
export function Listed<T>(props: { items: T[] | null; reading: string; empty: ComponentChildren; children: (items: T[]) => ComponentChildren }) {
  if (props.items === null) {
    return (
      <p class="placeholder" aria-busy="true">
        {props.reading}
      </p>
    );
  }
  if (props.items.length === 0) {
    return (
      <div class="empty-state small">
        <p>{props.empty}</p>
      </div>
    );
  }
  return <>{props.children(props.items)}</>;
}
