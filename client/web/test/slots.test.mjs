// The slot function of src/slots.ts against the values slots_test.go pins
// (read from that file, so both pin the same values) and against FNV-1a 64
// computed with BigInt over random spaces and sections.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { load } from "./bundle.mjs";

const { slotOf, slotGroup, groupOfKey, SLOT_COUNT } = await load("src/slots.ts");

// {"space", section, slot} rows of TestSlotOfIsPinned; a section is a
// decimal or "a << b".
function pinned() {
  const src = readFileSync(new URL("../../../slots_test.go", import.meta.url), "utf8");
  const body = src.slice(src.indexOf("func TestSlotOfIsPinned"), src.indexOf("func TestSlotBlocks"));
  return [...body.matchAll(/\{"([^"]*)", ([0-9]+)(?: << ([0-9]+))?, ([0-9]+)\}/g)].map((m) => ({
    space: m[1],
    section: BigInt(m[2]) << BigInt(m[3] ?? 0),
    want: Number(m[4]),
  }));
}

function fnvRef(space, section) {
  let h = 0xcbf29ce484222325n;
  const bytes = [...new TextEncoder().encode(space), 0];
  for (let i = 7; i >= 0; i--) bytes.push(Number((section >> BigInt(8 * i)) & 0xffn));
  for (const b of bytes) h = ((h ^ BigInt(b)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return Number(h % BigInt(SLOT_COUNT));
}

test("slotOf gives the values slots_test.go pins", () => {
  const rows = pinned();
  assert.ok(rows.length >= 4, `found ${rows.length} pinned values in slots_test.go`);
  for (const r of rows) assert.equal(slotOf(r.space, r.section), r.want, `slotOf(${JSON.stringify(r.space)}, ${r.section})`);
});

test("slotOf is FNV-1a 64 mod 4096", () => {
  const spaces = ["", "default", "users", "a", "ключи", "名前", "x".repeat(300)];
  let seed = 12345n;
  const rand = () => (seed = (seed * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn);
  for (const space of spaces) {
    for (const section of [0n, 1n, 255n, 256n, 0xffffffffn, 0x100000000n, 0xffffffffffffffffn, 1n << 63n]) {
      assert.equal(slotOf(space, section), fnvRef(space, section), `${space} ${section}`);
    }
    for (let i = 0; i < 2000; i++) {
      const section = rand() >> BigInt(Number(rand() % 64n));
      assert.equal(slotOf(space, section), fnvRef(space, section), `${space} ${section}`);
    }
  }
});

test("groups own contiguous blocks of slots, and one group every key", () => {
  for (const n of [1, 2, 3, 6, 7, 256]) {
    let last = 0;
    for (let s = 0; s < SLOT_COUNT; s++) {
      const g = slotGroup(s, n);
      assert.ok(g === last || g === last + 1, `n=${n} slot ${s}: group ${g} after ${last}`);
      last = g;
    }
    assert.equal(last, n - 1);
  }
  assert.equal(groupOfKey("users", 1000n, 123456n, 1), 0);
  assert.equal(groupOfKey("users", 1000n, 123456n, 6), slotGroup(slotOf("users", 123n), 6));
});
