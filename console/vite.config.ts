// The console's build: one entry, hashed file names under /assets/, no
// inline script or style anywhere (the server's Content-Security-Policy
// allows only 'self'), and the same bytes from the same sources on every
// machine (console/embed_test.go rebuilds and compares with the committed
// dist/).
import { defineConfig } from "vite";

export default defineConfig({
  base: "/",
  // Preact's automatic JSX runtime, compiled by esbuild (no Babel).
  esbuild: { jsx: "automatic", jsxImportSource: "preact", legalComments: "none" },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    // The polyfill is a script of its own in index.html; every browser
    // the console supports has modulepreload.
    modulePreload: { polyfill: false },
    // Never inline an asset as a data: URL in CSS or JS.
    assetsInlineLimit: 0,
    cssCodeSplit: true,
    reportCompressedSize: false,
    rollupOptions: {
      output: {
        entryFileNames: "assets/[name]-[hash].js",
        // A library's chunk is named after the library, not its entry file
        // (yaml's is browser/index.js).
        chunkFileNames: (c) => {
          const lib = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(c.facadeModuleId ?? "");
          return "assets/" + (lib ? lib[1].replace(/[@/]/g, "") : "[name]") + "-[hash].js";
        },
        assetFileNames: "assets/[name]-[hash][extname]",
      },
    },
  },
});
