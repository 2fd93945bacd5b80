// The client's generation checks (src/generation.ts): it remembers the
// newest generation met, and refuses answers of older generations, of a
// sibling restore, and of another lineage.

import assert from "node:assert/strict";
import { test } from "node:test";
import { load } from "./bundle.mjs";

const { Generations, parseGeneration } = await load("src/generation.ts");

test("parse and format", () => {
  assert.deepEqual(parseGeneration("ab12/3/ff"), { lineage: "ab12", number: 3n, cluster: "ff" });
  for (const bad of ["", "x", "a/b/c", "a/1", "a/1/c/d", "/1/c", "a/1/", "a b/1/c", "a/-1/c", "a/99999999999999999999/c"]) {
    assert.equal(parseGeneration(bad), undefined, bad);
  }
});

test("a newer generation replaces the known one; older, sibling and foreign answers are refused", () => {
  const g = new Generations();
  assert.equal(g.header(), "");
  assert.equal(g.see(null), undefined, "a server of a build before generations");
  assert.equal(g.see("L/0/S"), undefined);
  assert.equal(g.header(), "L/0/S");
  assert.equal(g.see("L/1/X"), undefined, "the restore that replaced the source");
  assert.equal(g.header(), "L/1/X");
  assert.match(g.see("L/0/S"), /replaced by a restore/);
  assert.match(g.see("L/1/Y"), /another restore of the same backup/);
  assert.match(g.see("M/0/M"), /another cluster/);
  assert.match(g.see("garbage"), /malformed/);
  assert.equal(g.see("L/1/X"), undefined);
  assert.equal(g.header(), "L/1/X");
});
