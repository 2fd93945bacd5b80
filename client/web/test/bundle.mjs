// Bundles a TypeScript entry point of this package with esbuild, for tests:
// load() imports it into node, bundle() returns it as a script for a browser.

import { build } from "esbuild";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

/** entry (relative to client/web) bundled as one script: an ES module, or with globalName an IIFE. */
export async function bundle(entry, globalName) {
  const res = await build({
    entryPoints: [path.join(root, entry)],
    bundle: true,
    write: false,
    format: globalName ? "iife" : "esm",
    globalName,
    target: "es2020",
    logLevel: "error",
  });
  return res.outputFiles[0].text;
}

/** The module of entry (relative to client/web), imported into node. */
export async function load(entry) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "seqd-web-test-"));
  try {
    const file = path.join(dir, "bundle.mjs");
    writeFileSync(file, await bundle(entry));
    return await import(pathToFileURL(file).href);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
