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
  assert.equal(g.see(null, true), undefined, "a server of a build before generations");
  assert.equal(g.see("L/0/S", true), undefined);
  assert.equal(g.header(), "L/0/S");
  assert.equal(g.see("L/1/X", true), undefined, "the restore that replaced the source");
  assert.equal(g.header(), "L/1/X");
  assert.match(g.see("L/0/S", true), /replaced by a restore/);
  assert.match(g.see("L/1/Y", true), /another restore of the same backup/);
  assert.match(g.see("M/0/M", true), /another cluster/);
  assert.match(g.see("garbage", true), /malformed/);
  assert.equal(g.see("L/1/X", true), undefined);
  assert.equal(g.header(), "L/1/X");
});

test("a generation met in an answer that handed out no values is checked, never named", () => {
  const g = new Generations();
  assert.equal(g.see("L/0/S", true), undefined);
  // A restore made by mistake that never served answers an error or a
  // status call: the client neither refuses its own cluster's answers
  // after it, nor names it to servers (which would fence themselves).
  assert.equal(g.see("L/1/X", false), undefined);
  assert.equal(g.header(), "L/0/S");
  assert.equal(g.see("L/0/S", true), undefined);
  assert.equal(g.see("L/1/X", true), undefined, "once it served, it replaces the source");
  assert.equal(g.header(), "L/1/X");
});
