// The terminal's screen: xterm.js, in a chunk of the build of its own that
// only the terminal page loads (terminal.tsx imports this file
// dynamically).
//
// Under the console's Content-Security-Policy (style-src 'self', nothing
// inline): xterm's DOM renderer writes <style> elements, which the policy
// blocks, so the canvas renderer is loaded before the terminal opens
// (xterm then never makes its DOM renderer), and xterm's own stylesheet is
// a built file of its own (?url), linked from <head> when the screen is
// first shown, so it is not part of every page's stylesheet. (xterm 6
// writes a <style> element for its scrollbar whatever the renderer, hence
// 5.5.)

import { Terminal } from "@xterm/xterm";
import { CanvasAddon } from "@xterm/addon-canvas";
import { FitAddon } from "@xterm/addon-fit";
import xtermCSS from "@xterm/xterm/css/xterm.css?url";

let styled: Promise<void> | null = null;

/** linkStyle links xterm's stylesheet once and waits for it. */
function linkStyle(): Promise<void> {
  styled ??= new Promise((resolve, reject) => {
    const link = document.createElement("link");
    link.rel = "stylesheet";
    link.href = xtermCSS;
    link.onload = () => resolve();
    link.onerror = () => {
      styled = null;
      link.remove();
      reject(new Error("the terminal's stylesheet could not be loaded"));
    };
    document.head.appendChild(link);
  });
  return styled;
}

/** Screen is a terminal on the page: what is typed, what is shown, its size. */
export interface Screen {
  rows: number;
  cols: number;
  write(data: Uint8Array | string): void;
  /** onData is called with what the person types (as bytes to send). */
  onData(f: (b: Uint8Array) => void): void;
  /** onResize is called when the screen's size in cells changes. */
  onResize(f: (rows: number, cols: number) => void): void;
  reset(): void;
  focus(): void;
  dispose(): void;
}

/** theme is the terminal's colours from the console's (the log's) CSS variables. */
function theme() {
  const css = getComputedStyle(document.documentElement);
  const v = (name: string, def: string) => css.getPropertyValue(name).trim() || def;
  const bg = v("--log-bg", "#14181f");
  const fg = v("--log-text", "#e7eaf0");
  return { background: bg, foreground: fg, cursor: fg, cursorAccent: bg, selectionBackground: v("--log-muted", "#a7afbd") + "66" };
}

/** openScreen shows a terminal in host, fitted to it and following its size. */
export async function openScreen(host: HTMLElement, label: string, takesTab: () => boolean): Promise<Screen> {
  await linkStyle();
  const css = getComputedStyle(document.documentElement);
  const term = new Terminal({
    theme: theme(),
    fontFamily: css.getPropertyValue("--mono").trim() || "monospace",
    fontSize: 14,
    cursorBlink: true,
    scrollback: 5000,
    // Screen readers read the screen's rows and hear its output.
    screenReaderMode: true,
    convertEol: false,
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.loadAddon(new CanvasAddon());
  // Tab completes in the shell while one is connected, else moves the
  // focus on; Shift+Tab always leaves the terminal (no keyboard trap).
  term.attachCustomKeyEventHandler((e) => !(e.key === "Tab" && (e.shiftKey || !takesTab())));
  term.open(host);
  term.textarea?.setAttribute("aria-label", label);
  fit.fit();
  const enc = new TextEncoder();
  const resizers: ((rows: number, cols: number) => void)[] = [];
  term.onResize(({ rows, cols }) => resizers.forEach((f) => f(rows, cols)));
  // The window's size, and the system's theme, change the screen's.
  let frame = 0;
  const refit = () => {
    cancelAnimationFrame(frame);
    frame = requestAnimationFrame(() => fit.fit());
  };
  window.addEventListener("resize", refit);
  const dark = matchMedia("(prefers-color-scheme: dark)");
  const recolor = () => (term.options.theme = theme());
  dark.addEventListener("change", recolor);
  return {
    get rows() {
      return term.rows;
    },
    get cols() {
      return term.cols;
    },
    write: (d) => term.write(d),
    onData(f) {
      term.onData((s) => f(enc.encode(s)));
      // Mouse reports in the X10 encoding: bytes, not UTF-8.
      term.onBinary((s) => f(Uint8Array.from(s, (c) => c.charCodeAt(0) & 0xff)));
    },
    onResize: (f) => void resizers.push(f),
    reset: () => term.reset(),
    focus: () => term.focus(),
    dispose() {
      window.removeEventListener("resize", refit);
      dark.removeEventListener("change", recolor);
      cancelAnimationFrame(frame);
      term.dispose();
    },
  };
}
