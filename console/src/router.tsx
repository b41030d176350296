// A router of a few lines: the page is the address's path; links and
// navigate() change it with the History API (no page load).

import { useEffect, useState } from "preact/hooks";
import type { ComponentChildren, JSX } from "preact";

const listeners = new Set<() => void>();

/** navigate shows the console page at to (a path with its query). */
export function navigate(to: string, replace = false): void {
  if (replace) {
    history.replaceState(null, "", to);
  } else {
    history.pushState(null, "", to);
  }
  listeners.forEach((l) => l());
}

/** useLocation re-renders on every change of the address. */
export function useLocation(): { path: string; search: string } {
  const [, tick] = useState(0);
  useEffect(() => {
    const l = () => tick((n) => n + 1);
    listeners.add(l);
    window.addEventListener("popstate", l);
    return () => {
      listeners.delete(l);
      window.removeEventListener("popstate", l);
    };
  }, []);
  return { path: location.pathname, search: location.search };
}

/** Link is an anchor the router follows in place. */
export function Link(props: { href: string; children: ComponentChildren } & JSX.HTMLAttributes<HTMLAnchorElement>) {
  const { href, children, ...rest } = props;
  const onClick = (e: MouseEvent) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) {
      return;
    }
    e.preventDefault();
    navigate(href);
  };
  return (
    <a href={href} onClick={onClick} {...rest}>
      {children}
    </a>
  );
}
