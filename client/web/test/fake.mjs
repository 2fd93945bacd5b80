// Fake seqd nodes behind a fake fetch, for the unit tests of the browser
// client: a node's Next answers key*1000+n (n counting its own calls for the
// key) with the Seqd-Group / Seqd-Leader / Seqd-Routing-Version headers the
// test sets, and its ClusterStatus answers the test's status.

import { load } from "./bundle.mjs";

const { groupOfKey } = await load("src/slots.ts");

export const V1 = (5n << 32n) | 1n;

/**
 * A fake cluster: fetch answers for nodes by host ("a:1"); status is what
 * ClusterStatus returns. A node's fields: fail (the next request fails with
 * it: [status, code, headers]), failIf (a request whose keys it returns a
 * failure for fails so), down (unreachable), delay (a function: how long
 * to take, in ms), and the answers' headers.
 * hold(h) makes h's requests wait (recorded on arrival) until release(h).
 */
export function fakeCluster(hosts) {
  const c = { nodes: new Map(), status: undefined, statusCalls: 0 };
  for (const h of hosts) {
    c.nodes.set(h, { cur: new Map(), reqs: [], group: "", hint: "", version: String(V1), fail: undefined, failIf: undefined, delay: undefined, down: false, gate: undefined });
  }
  c.fetch = async (url, init) => {
    const u = new URL(url);
    const f = c.nodes.get(u.host);
    if (!f || f.down) throw new TypeError("fetch failed");
    const method = u.pathname.split("/").pop();
    const body = JSON.parse(new TextDecoder().decode(init.body));
    const json = (status, msg, headers = {}) =>
      new Response(JSON.stringify(msg), { status, headers: { "Content-Type": "application/json", ...headers } });
    if (method === "ClusterStatus") {
      c.statusCalls++;
      return c.status ? json(200, c.status) : json(503, { code: "unavailable", message: "no status" });
    }
    const keys = (body.keys ?? [body.key]).map(BigInt);
    f.reqs.push({ method, url: u.origin, space: body.space ?? "", keys });
    if (f.gate) await f.gate.promise;
    if (f.delay) await new Promise((r) => setTimeout(r, f.delay()));
    const fail = f.fail ?? f.failIf?.(keys);
    if (fail) {
      const [status, code, hdrs] = fail;
      f.fail = undefined;
      return json(status, { code, message: "fake failure" }, hdrs);
    }
    const vals = keys.map((k) => {
      const n = (f.cur.get(k) ?? 0n) + (method === "Current" ? 0n : 1n);
      f.cur.set(k, n);
      return String(k * 1000n + n);
    });
    const headers = {};
    if (f.group) headers["Seqd-Group"] = f.group;
    if (f.hint) headers["Seqd-Leader"] = f.hint;
    if (f.version) headers["Seqd-Routing-Version"] = f.version;
    return json(200, method === "Reserve" ? { first: vals[0], count: body.count } : { values: vals }, headers);
  };
  c.take = (h) => {
    const f = c.nodes.get(h);
    const out = f.reqs;
    f.reqs = [];
    return out;
  };
  c.set = (h, fields) => Object.assign(c.nodes.get(h), fields);
  c.hold = (h) => {
    let release;
    const promise = new Promise((r) => (release = r));
    c.nodes.get(h).gate = { promise, release };
  };
  c.release = (h) => {
    const f = c.nodes.get(h);
    f.gate?.release();
    f.gate = undefined;
  };
  return c;
}

/** A ClusterStatus of groups given as [leader address, term] rows, the default space of section size 100. */
export function status(version, leader, rows, extra = {}) {
  return {
    leaderApiAddr: leader,
    version: String(version),
    slotCount: 4096,
    slotMapVersion: "1",
    spaces: [{ name: "default", step: "1000", sectionSize: "100" }],
    groups: rows.map(([addr, term], g) => ({ group: g, leaderApiAddr: addr, term: String(term) })),
    ...extra,
  };
}

/** A key of the default space (section size 100, 3 groups) owned by group g, at least from. */
export function keyOfGroup(g, from) {
  for (let k = from; ; k += 100n) if (groupOfKey("default", 100n, k, 3) === g) return k;
}

export async function until(what, cond) {
  const deadline = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}
