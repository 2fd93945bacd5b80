// The status page's words for a call that got no answer (src/page/unreachable.ts):
// the address, and the cause (down or unreachable; or CORS from another origin).

import assert from "node:assert/strict";
import { test } from "node:test";
import { load } from "./bundle.mjs";

const { describeCallError } = await load("src/page/unreachable.ts");
const { ConnectError, Code } = await load("src/index.ts");

test("a fetch that got no answer names the address, not 'unknown: Failed to fetch'", () => {
  for (const raw of ["Failed to fetch", "NetworkError when attempting to fetch resource.", "Load failed"]) {
    const text = describeCallError(new TypeError(raw), "http://127.0.0.1:7720", "http://127.0.0.1:7720");
    assert.equal(text, "cannot reach http://127.0.0.1:7720: the node is down or unreachable (no answer)");
  }
});

test("from another origin, CORS is named as a possible cause with the flag that fixes it", () => {
  const text = describeCallError(new TypeError("Failed to fetch"), "http://10.0.0.2:7700", "http://localhost:5173");
  assert.match(text, /^cannot reach http:\/\/10\.0\.0\.2:7700: the node is down or unreachable, or it does not allow this page's origin http:\/\/localhost:5173/);
  assert.match(text, /--cors-origin http:\/\/localhost:5173/);
});

test("an answer from the node keeps its code and message", () => {
  const err = new ConnectError("no leader known", Code.Unavailable);
  assert.equal(describeCallError(err, "http://127.0.0.1:7700", "http://127.0.0.1:7700"), "unavailable: no leader known");
});
