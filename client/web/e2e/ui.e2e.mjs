// End-to-end test of the status page in a real browser (Debian's chromium,
// headless, driven by playwright-core) against three real `seqd serve`
// processes on 127.0.0.1.
//
// The page is served by ui/cmd/uitest, which also fronts the cluster's API
// with ui.CORS for the page's origin, so every call the page makes is a
// cross-origin Connect or gRPC-Web request with a CORS preflight.
//
// Checks: the page shows the leader and three nodes; Next and Current from the
// page return values over Connect, then over gRPC-Web; flake ids issued from
// the page come from a worker of the node behind the proxy, and the page's
// workers table shows that worker held by that node, with the token
// ListWorkers reports; after the leader is killed (kill -9), the page shows
// the new leader, the dead node as unreachable, and a Next from the page
// returns a larger value. Last, against a fourth, single-node cluster that
// requires an admin token: without the token the page says so where the
// workers would be, and once the token is entered it lists that node's worker;
// that node runs 3 raft groups (--groups 3), and the page's Raft groups panel
// shows the 3 groups led by it (the 3-node cluster, of one group, shows none).
// A page pointed at an address where nothing answers names the address and
// the causes (down or unreachable; or CORS) instead of "Failed to fetch".
//
// Routing by raft group (first, against a second 3-node cluster with
// --groups 3 whose nodes allow the origin of its first node, whose own /ui/
// the browser opens, each group led by another node): the slot function of
// the bundled client agrees with the cluster's LocateKeys; once the client's
// table names the cluster's group leaders, every Reserve, Current and Next
// share goes straight to its group's leader (its answer carries Seqd-Group,
// the group of the keys sent, and Seqd-Served-By the node the request went
// to, and no Seqd-Leader: nothing was forwarded), a Next spanning every group
// goes as one request per group, over Connect and gRPC-Web, and its values
// come back in the keys' order (taken again if leadership moved meanwhile);
// the same call from a client with routing disabled goes whole to one node
// (no Seqd-Group on its answer: what a broken router would show). Last,
// concurrent Next calls from the page are coalesced per group: fewer
// requests than calls (the client's batchStats), each request of one group's
// keys, and every value right (none twice per key; a call that returned
// before another began got the smaller value).
//
// Env: SEQD_BIN, UITEST_BIN (built binaries; required), CHROMIUM (default
// /usr/bin/chromium), E2E_OUT (directory for screenshots and logs; default a
// temporary directory, printed). Run through client/web/e2e.sh.

import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, openSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";
import { bundle, load } from "../test/bundle.mjs";

const SEQD = process.env.SEQD_BIN;
const UITEST = process.env.UITEST_BIN;
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
if (!SEQD || !UITEST) {
  console.error("SEQD_BIN and UITEST_BIN must name built binaries (see client/web/e2e.sh)");
  process.exit(2);
}
const work = mkdtempSync(path.join(os.tmpdir(), "seqd-ui-e2e-"));
const out = process.env.E2E_OUT || work;
mkdirSync(out, { recursive: true });

const procs = []; // {name, child}
const t0 = Date.now();
const log = (...a) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s]`, ...a);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A port free now, never one handed out before.
const usedPorts = new Set();
async function freePort() {
  for (;;) {
    const port = await new Promise((resolve, reject) => {
      const s = net.createServer();
      s.unref();
      s.on("error", reject);
      s.listen(0, "127.0.0.1", () => {
        const { port } = s.address();
        s.close(() => resolve(port));
      });
    });
    if (!usedPorts.has(port)) {
      usedPorts.add(port);
      return port;
    }
  }
}

function start(name, bin, args, env = {}) {
  const fd = openSync(path.join(out, `${name}.log`), "a");
  const child = spawn(bin, args, { stdio: ["ignore", fd, fd], env: { ...process.env, ...env } });
  child.exitedWith = undefined;
  child.on("exit", (code, sig) => (child.exitedWith = sig || code));
  procs.push({ name, child });
  return child;
}

async function rpc(addr, method, body, timeoutMs = 2000) {
  const res = await fetch(`http://${addr}/${method}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const json = await res.json();
  if (!res.ok) throw new Error(`${method}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

async function until(what, fn, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${last.message}` : ""}`);
    await sleep(100);
  }
}

function assert(cond, msg) {
  if (!cond) throw new Error(`assertion failed: ${msg}`);
}

async function main() {
  // Two clusters: nodes (one raft group: --groups 1, the default being one
  // per bootstrap server), and gnodes with 3 raft groups
  // (checked first, see groupRouting), started together. Every port is
  // picked before either starts (their outgoing connections take ports too).
  const nodes = [];
  const gnodes = [];
  for (let i = 1; i <= 3; i++) {
    nodes.push({ id: `n${i}`, api: `127.0.0.1:${await freePort()}`, raft: `127.0.0.1:${await freePort()}`, gossip: `127.0.0.1:${await freePort()}` });
    gnodes.push({ id: `g${i}`, api: `127.0.0.1:${await freePort()}`, raft: `127.0.0.1:${await freePort()}`, gossip: `127.0.0.1:${await freePort()}` });
  }
  const join = nodes.map((n) => n.gossip).join(",");
  for (const n of nodes) {
    n.child = start(n.id, SEQD, [
      "serve", "--id", n.id, "--data-dir", path.join(work, n.id),
      "--api-addr", n.api, "--raft-addr", n.raft, "--gossip-addr", n.gossip,
      "--join", join, "--bootstrap-expect", "3", "--groups", "1",
      "--lease", "500ms", "--raft-heartbeat-timeout", "300ms", "--raft-election-timeout", "300ms",
      "--raft-leader-lease-timeout", "150ms",
    ]);
  }
  for (const n of gnodes) {
    n.child = start(n.id, SEQD, [
      "serve", "--id", n.id, "--data-dir", path.join(work, n.id),
      "--api-addr", n.api, "--raft-addr", n.raft, "--gossip-addr", n.gossip,
      "--join", gnodes.map((g) => g.gossip).join(","), "--bootstrap-expect", "3", "--groups", "3",
      "--cors-origin", `http://${gnodes[0].api}`,
      "--lease", "500ms", "--raft-heartbeat-timeout", "300ms", "--raft-election-timeout", "300ms",
      "--raft-leader-lease-timeout", "150ms",
    ]);
  }
  const leaderOf = async (addrs) => {
    for (const a of addrs) {
      try {
        const st = await rpc(a, "seq.v1.AdminService/ClusterStatus", {}, 1000);
        if (st.leaderId) return st.leaderId;
      } catch {}
    }
    return undefined;
  };
  const first = await until("a leader", () => leaderOf(nodes.map((n) => n.api)), 30000);
  await until("the leader to serve", () => rpc(nodes[0].api, "seq.v1.SequenceService/Next", { keys: [1] }), 15000);
  log(`cluster up: leader ${first}`);

  const uiAddr = `127.0.0.1:${await freePort()}`;
  const apiAddr = `127.0.0.1:${await freePort()}`;
  // The leader first: the proxy talks to it until it dies, then fails over.
  const order = [...nodes].sort((a, b) => (a.id === first ? -1 : b.id === first ? 1 : 0));
  start("uitest", UITEST, ["--ui-addr", uiAddr, "--api-addr", apiAddr, "--nodes", order.map((n) => n.api).join(",")]);
  await until("uitest", async () => (await fetch(`http://${uiAddr}/ui/`)).ok, 10000);

  const profile = mkdtempSync(path.join(os.tmpdir(), "seqd-ui-chromium-"));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1280, height: 900 },
  });
  try {
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    const consoleErrors = [];
    page.on("console", (m) => m.type() === "error" && consoleErrors.push(m.text()));
    page.on("pageerror", (e) => consoleErrors.push(`pageerror: ${e.message}`));
    await groupRouting(ctx, gnodes, consoleErrors);
    for (const n of gnodes) n.child.kill("SIGTERM"); // done with them: free the CPU
    const url = `http://${uiAddr}/ui/?api=http://${apiAddr}&transport=connect`;
    log(`open ${url}`);
    await page.goto(url);

    const shownLeader = () => page.locator("#leader").getAttribute("data-leader");
    await page.waitForFunction(() => document.querySelector("#leader")?.dataset.leader, null, { timeout: 15000 });
    // The page and the cluster agree on the leader (allowing a poll's delay).
    const agreed = (live) => until("the page to show the cluster's leader", async () => {
      const actual = await leaderOf(live.map((n) => n.api));
      const shown = await shownLeader();
      return actual && shown === actual ? actual : undefined;
    }, 15000);
    let leader = await agreed(nodes);
    await page.waitForFunction(() => document.querySelectorAll("#nodes tbody tr").length === 3, null, { timeout: 5000 });
    await page.waitForFunction(() => document.querySelectorAll("#spaces tbody tr").length >= 1, null, { timeout: 5000 });
    // One raft group (--groups 1): no groups panel.
    assert(await page.locator("#groups-panel").isHidden(), "a single-group cluster shows no Raft groups panel");
    assert((await page.locator("#groups tbody tr").count()) === 0, "no group rows for a single-group cluster");
    log(`page shows leader ${leader}, 3 nodes, conn: ${await page.locator("#conn").textContent()}`);

    const call = async (btn) => {
      await page.evaluate(() => { const r = document.querySelector("#result"); r.className = "result"; delete r.dataset.value; });
      await page.click(btn);
      await page.waitForSelector("#result.ok[data-value], #result.bad", { timeout: 20000 });
      const text = await page.locator("#result").textContent();
      const v = await page.locator("#result").getAttribute("data-value");
      assert(v !== null, `call failed on the page: ${text}`);
      log(`page: ${text}`);
      return BigInt(v);
    };
    await page.fill("#key", "4242");
    const v1 = await call("#next-btn");
    assert(v1 >= 1n, "Next returned a value");
    const c1 = await call("#current-btn");
    assert(c1 >= v1, `Current ${c1} >= Next ${v1}`);
    const id1 = await call("#id-btn");
    const id2 = await call("#id-btn");
    assert(id1 > 0n && id2 > id1, `flake ids ${id1} then ${id2}: positive and rising (one node, one worker)`);
    await page.waitForFunction(() => [...document.querySelectorAll("#namespaces tbody td")].some((td) => td.textContent === "default"), null, { timeout: 15000 });

    // The proxy sends the page's calls to order[0] (the first leader), and a
    // node issues flake ids from workers it holds itself, labelled with its id:
    // the ids decode to a worker of that node, ListWorkers lists it as held,
    // and the page's workers table must show that row with the same data.
    const holderNode = order[0];
    // (A node decodes from its own replica of the state, which may trail the
    // grant by a moment: wait until it names the id's holder.)
    const dec = await until(`${holderNode.id} to decode ${id2} with its holder`, async () => {
      const d = await rpc(holderNode.api, "seq.v1.IdService/Decode", { id: String(id2) });
      return d.holderLabel ? d : undefined;
    }, 5000);
    const workerId = dec.worker ?? 0; // proto3 JSON leaves out a 0
    assert(dec.holderLabel === holderNode.id, `id ${id2} decodes to a worker held by ${holderNode.id}: ${JSON.stringify(dec)}`);
    const listed = await rpc(holderNode.api, "seq.v1.AdminService/ListWorkers", { namespace: "default" });
    const w = (listed.workers ?? []).find((x) => (x.id ?? 0) === workerId);
    assert(w && w.held && w.label === holderNode.id, `ListWorkers shows worker ${workerId} held by ${holderNode.id}: ${JSON.stringify(listed)}`);
    const rowSel = `#workers .ns-workers[data-namespace="default"] tr[data-worker="${workerId}"]`;
    await page.waitForSelector(rowSel, { timeout: 20000 }).catch(async (e) => {
      throw new Error(`the page shows no row for worker ${workerId} of "default" (workers panel: ${JSON.stringify(await page.locator("#workers").textContent())}): ${e.message}`);
    });
    const cells = (await page.locator(rowSel).locator("td").allTextContents()).map((t) => t.trim());
    log(`page: worker row ${JSON.stringify(cells)}`);
    assert(cells.length === 6, `worker row has 6 cells: ${JSON.stringify(cells)}`);
    assert(cells[0] === String(workerId), `worker cell ${cells[0]} is ${workerId}`);
    assert(cells[1] === "held", `state cell ${cells[1]} is held`);
    assert(cells[2] === holderNode.id, `holder cell ${cells[2]} is ${holderNode.id}`);
    assert(cells[3] === String(w.token), `token cell ${cells[3]} is ListWorkers' ${w.token}`);
    assert(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z [+−]/.test(cells[4]), `hwm cell ${cells[4]} is a time`);
    assert(/ left of 10\.0 s$/.test(cells[5]), `lease cell ${cells[5]} shows the lease left`);
    const summary = await page.locator('#workers .ns-workers[data-namespace="default"] h3').textContent();
    assert(/\b[1-9]\d* held\b/.test(summary), `namespace heading counts held workers: ${summary}`);

    await page.click('label:has(input[value="grpc-web"])');
    await page.waitForFunction(() => document.body.dataset.transport === "grpc-web" && document.querySelector("#conn").textContent.includes("grpc-web"), null, { timeout: 5000 });
    const v2 = await call("#next-btn");
    assert(v2 > v1, `gRPC-Web Next ${v2} > Connect Next ${v1}`);
    // A little load from outside the page for 3 s, so issued/s has something to show
    // (when the node behind the proxy is the leader: only leaders issue values).
    const loadUntil = Date.now() + 3000;
    while (Date.now() < loadUntil) {
      await Promise.allSettled(nodes.map((n) => rpc(n.api, "seq.v1.SequenceService/Next", { keys: [7, 8, 9] })));
      await sleep(20);
    }
    const rateText = await page.locator("#rate").textContent();
    const rateSrc = await page.locator("#rate-src").textContent();
    log(`issued/s: ${rateText} (${rateSrc})`);
    // The page reads the leader's /metrics only when the proxy's node is the
    // leader (the real nodes send no CORS headers); otherwise it says so.
    assert(/^[0-9.]+k?$/.test(rateText) ? Number(rateText.replace("k", "")) > 0 : rateSrc.includes("not reachable"),
      `issued/s shows a positive rate or why it cannot: ${rateText} (${rateSrc})`);
    await page.screenshot({ path: path.join(out, "ui-before.png"), fullPage: true });

    leader = await agreed(nodes); // leadership may have moved meanwhile (a busy machine)
    const victim = nodes.find((n) => n.id === leader);
    log(`kill -9 ${victim.id} (pid ${victim.child.pid})`);
    const killedAt = Date.now();
    process.kill(victim.child.pid, "SIGKILL");
    await page.waitForFunction((old) => {
      const l = document.querySelector("#leader")?.dataset.leader;
      return l && l !== old;
    }, leader, { timeout: 30000 });
    log(`page shows new leader ${await shownLeader()} after ${Date.now() - killedAt} ms`);
    const newLeader = await agreed(nodes.filter((n) => n !== victim));
    assert(newLeader !== victim.id, `new leader ${newLeader} is not the killed ${victim.id}`);
    await page.waitForSelector(`#nodes tr[data-node="${victim.id}"][data-state="unreachable"]`, { timeout: 15000 });
    const v3 = await call("#next-btn");
    assert(v3 > v2, `Next after failover ${v3} > ${v2}`);
    const events = await page.locator("#events").textContent();
    assert(events.includes(`→ ${newLeader}`), `events log the leader change: ${events}`);
    await sleep(1500);
    await page.screenshot({ path: path.join(out, "ui.png"), fullPage: true });

    // A single-node cluster that requires the admin token (SEQD_TOKEN), behind
    // its own proxy. The page without the token: ClusterStatus and ListWorkers
    // fail, and the workers panel says why instead of showing an empty table.
    const tok = "e2e-admin-token";
    const solo = { id: "n4", api: `127.0.0.1:${await freePort()}`, raft: `127.0.0.1:${await freePort()}`, gossip: `127.0.0.1:${await freePort()}` };
    start(solo.id, SEQD, [
      "serve", "--id", solo.id, "--data-dir", path.join(work, solo.id),
      "--api-addr", solo.api, "--raft-addr", solo.raft, "--gossip-addr", solo.gossip,
      "--join", solo.gossip, "--bootstrap-expect", "1", "--groups", "3",
    ], { SEQD_TOKEN: tok });
    // IdService needs no token (no --token-sequence): this makes n4 hold a worker.
    const soloId = await until("n4 to issue a flake id", () => rpc(solo.api, "seq.v1.IdService/NextIds", { count: 1 }), 30000);
    log(`n4 issued ${soloId.ids[0]}`);
    const ui2 = `127.0.0.1:${await freePort()}`;
    const api2 = `127.0.0.1:${await freePort()}`;
    start("uitest2", UITEST, ["--ui-addr", ui2, "--api-addr", api2, "--nodes", solo.api]);
    await until("uitest2", async () => (await fetch(`http://${ui2}/ui/`)).ok, 10000);
    const page2 = await ctx.newPage();
    page2.on("console", (m) => m.type() === "error" && consoleErrors.push(m.text()));
    page2.on("pageerror", (e) => consoleErrors.push(`pageerror: ${e.message}`));
    await page2.goto(`http://${ui2}/ui/?api=http://${api2}&transport=connect`);
    await page2.waitForSelector("#workers.bad", { timeout: 10000 });
    const noToken = await page2.locator("#workers").textContent();
    log(`page without the token: ${noToken}`);
    assert(noToken.includes("unauthenticated") && noToken.includes("Bearer token"), `the workers panel asks for the token: ${noToken}`);
    assert((await page2.locator("#workers tr[data-worker]").count()) === 0, "no worker rows without the token");
    await page2.click("footer summary");
    await page2.fill("#token", tok);
    await page2.press("#token", "Tab"); // commit the field (change event)
    await page2.waitForSelector(`#workers .ns-workers[data-namespace="default"] tr[data-state="held"][data-label="${solo.id}"]`, { timeout: 15000 });
    const row2 = (await page2.locator(`#workers tr[data-label="${solo.id}"]`).first().locator("td").allTextContents()).map((t) => t.trim());
    log(`page with the token: worker row ${JSON.stringify(row2)}`);
    assert(row2[1] === "held" && row2[2] === solo.id, `n4's worker is shown held by n4: ${JSON.stringify(row2)}`);
    // n4 runs 3 raft groups (--groups 3) and, alone, leads them all.
    await page2.waitForFunction((id) => {
      const rows = [...document.querySelectorAll("#groups tbody tr")];
      return !document.querySelector("#groups-panel").hidden && rows.length === 3 && rows.every((r) => r.dataset.leader === id);
    }, solo.id, { timeout: 15000 }).catch(async (e) => {
      throw new Error(`the page shows no 3 groups led by ${solo.id} (groups panel: ${JSON.stringify(await page2.locator("#groups-panel").textContent())}): ${e.message}`);
    });
    const groupRows = await page2.locator("#groups tbody tr").evaluateAll((rows) => rows.map((r) => [...r.cells].map((c) => c.textContent.trim())));
    log(`page: group rows ${JSON.stringify(groupRows)}`);
    assert(groupRows.map((r) => r[0]).join() === "0,1,2", `groups 0, 1, 2: ${JSON.stringify(groupRows)}`);
    for (const r of groupRows) {
      assert(r.length === 7 && r[1] === solo.id, `group ${r[0]} is led by ${solo.id}: ${JSON.stringify(r)}`);
      assert(/^\d+-\d+$/.test(r[5]) && r[6] === solo.id, `group ${r[0]} shows its slots and its one voter ${solo.id}: ${JSON.stringify(r)}`);
    }
    const led = await page2.locator("#groups-led").textContent();
    assert(led === `groups led: ${solo.id} 3`, `groups led line: ${led}`);
    await page2.screenshot({ path: path.join(out, "ui-token.png"), fullPage: true });
    await page2.close();

    // A page whose node does not answer names its address and the causes,
    // not "unknown: Failed to fetch".
    const dead = `127.0.0.1:${await freePort()}`;
    const page3 = await ctx.newPage();
    await page3.goto(`http://${ui2}/ui/?api=http://${dead}&transport=connect`);
    await page3.waitForFunction(() => document.querySelector("#conn")?.textContent.includes("cannot reach"), null, { timeout: 15000 });
    const down = await page3.locator("#conn").textContent();
    log(`page of a node that is down: ${down}`);
    assert(down.includes(`cannot reach http://${dead}: the node is down or unreachable, or it does not allow this page's origin http://${ui2}`),
      `the page names the address and the causes: ${down}`);
    await page3.close();

    const unexpected = consoleErrors.filter((e) => !/metrics|CORS|Failed to load resource|ERR_CONNECTION_REFUSED/.test(e));
    if (consoleErrors.length) log(`console errors (${consoleErrors.length}, expected: cross-origin /metrics of nodes without CORS):\n  ${[...new Set(consoleErrors)].slice(0, 5).join("\n  ")}`);
    assert(unexpected.length === 0, `unexpected console errors: ${unexpected.join("; ")}`);
    log(`PASS (screenshots in ${out})`);
  } finally {
    await ctx.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

// groupRouting checks routing by raft group from the browser (see the top of
// this file) against gnodes, a 3-node cluster with --groups 3 whose nodes
// allow the origin of gnodes[0], whose status page the browser opens.
async function groupRouting(ctx, gnodes, consoleErrors) {
  const home = gnodes[0];
  const idOf = new Map(gnodes.map((n) => [`http://${n.api}`, n.id]));
  // Every group served by its preferred leader, one group per node (where the
  // cluster's balancing leaves it), so that leadership holds still meanwhile.
  const st = await until("3 groups led by 3 nodes", async () => {
    const st = await rpc(home.api, "seq.v1.AdminService/ClusterStatus", {}, 1000);
    const rows = st.groups ?? [];
    const ok = rows.length === 3 && new Set(rows.map((r) => r.leaderId)).size === 3 &&
      rows.every((r) => r.serving && r.leaderApiAddr && r.leaderId === r.preferredLeader);
    return ok ? st : undefined;
  }, 60000);
  log(`3 groups: ${st.groups.map((r) => `${r.group ?? 0}→${r.leaderId}`).join(" ")}`);

  // The client's slot function against the cluster's, over 300 sections.
  const { slotOf, groupOfKey } = await load("src/slots.ts");
  const size = BigInt(st.spaces?.find((s) => s.name === "default")?.sectionSize ?? 100000);
  const probe = Array.from({ length: 300 }, (_, i) => BigInt(i) * size + 7n);
  const loc = await rpc(home.api, "seq.v1.AdminService/LocateKeys", { space: "default", keys: probe.map(String) });
  probe.forEach((k, i) => {
    const [slot, group] = [slotOf("default", k / size), groupOfKey("default", size, k, 3)];
    assert(slot === loc.slots[i] && group === loc.groups[i],
      `key ${k}: the client computes slot ${slot} group ${group}, the cluster ${loc.slots[i]} ${loc.groups[i]}`);
  });
  const groupOf = new Map(probe.map((k, i) => [String(k), loc.groups[i]]));
  // Two keys of two sections per group; a Next naming them all, some twice, out of order.
  const byGroup = [0, 1, 2].map((g) => probe.filter((k) => groupOf.get(String(k)) === g).slice(0, 2).map(String));
  const [[a0, a1], [b0, b1], [c0, c1]] = byGroup;
  const multi = [a0, b0, c0, a1, c0, b1, a0, c1, b0];
  const unique = [...new Set(multi)];
  log(`keys by group: ${JSON.stringify(byGroup)}`);

  const page = await ctx.newPage();
  page.on("console", (m) => m.type() === "error" && consoleErrors.push(m.text()));
  page.on("pageerror", (e) => consoleErrors.push(`pageerror: ${e.message}`));
  await page.goto(`http://${home.api}/ui/`);
  // The status page served by a node of 3 groups (it does not route: its node forwards).
  await page.waitForFunction(() => !document.querySelector("#groups-panel").hidden &&
    document.querySelectorAll("#groups tbody tr").length === 3, null, { timeout: 15000 });
  // The client bundled as a script (the page's policy allows no inline
  // script: evaluate it), and clients whose fetch records every sequence
  // request: its URL, keys (Connect JSON) and answer headers.
  await page.evaluate(`${await bundle("src/index.ts", "SeqdWeb")}\nglobalThis.SeqdWeb = SeqdWeb;`);
  await page.evaluate((base) => {
    const log = [];
    const record = async (input, init) => {
      const res = await fetch(input, init);
      const url = String(input);
      if (url.includes("/seq.v1.SequenceService/")) {
        let keys;
        try {
          const b = JSON.parse(new TextDecoder().decode(init.body));
          keys = b.keys ?? [b.key];
        } catch {} // gRPC-Web: binary
        log.push({ node: url.slice(0, url.indexOf("/seq.v1.")), method: url.split("/").pop(), keys,
          group: res.headers.get("Seqd-Group"), leader: res.headers.get("Seqd-Leader"), servedBy: res.headers.get("Seqd-Served-By") });
      }
      return res;
    };
    const make = (opts) => SeqdWeb.createSeqdClient(base, { ...opts, fetch: record });
    window.e2e = {
      log,
      clients: { connect: make({}), grpcWeb: make({ transport: "grpc-web" }), whole: make({ disableRouting: true }) },
    };
  }, `http://${home.api}`);

  // The cluster's leader of each group (base URLs; "" for none serving),
  // and its leaders and terms, to tell whether leadership moved.
  const clusterLeaders = async () => {
    const st = await rpc(home.api, "seq.v1.AdminService/ClusterStatus", {}, 1000);
    const urls = [];
    for (const r of st.groups ?? []) urls[r.group ?? 0] = r.serving && r.leaderApiAddr ? `http://${r.leaderApiAddr}` : "";
    return { urls: JSON.stringify(urls), terms: (st.groups ?? []).map((r) => `${r.group ?? 0}:${r.leaderId}@${r.term}`).join(" ") };
  };
  // Until both routed clients name the cluster's leader for every group
  // (calling meanwhile: answers teach the table too, and the first call of
  // each client, whole, starts its first refresh).
  const tablesAgree = () => until("the clients' tables to name the cluster's group leaders", async () => {
    const want = (await clusterLeaders()).urls;
    const got = await page.evaluate(async (keys) => {
      for (const c of Object.values(window.e2e.clients)) await c.next("default", keys);
      return ["connect", "grpcWeb"].map((c) => JSON.stringify(window.e2e.clients[c].routing().groups.map((g) => g.leader)));
    }, unique);
    return got.every((t) => t === want) ? want : undefined;
  }, 15000);

  // A request went straight to its group's leader: its answer names the
  // group (Seqd-Group, the group of the keys sent), the node asked served it
  // (Seqd-Served-By), and nothing was forwarded (no Seqd-Leader).
  const direct = (e, what) => {
    const g = Number(String(e.group).split(" ")[0]);
    assert(e.group !== null && e.leader === null && e.servedBy === idOf.get(e.node),
      `${what}: ${e.method} to ${e.node} (${idOf.get(e.node)}) answered Seqd-Group ${e.group}, Seqd-Leader ${e.leader}, served by ${e.servedBy}`);
    if (e.keys) assert(e.keys.every((k) => groupOf.get(k) === g), `${what}: ${e.method} to group ${g} named keys ${e.keys}`);
  };
  const oneRequestPerGroup = (reqs, what) => assert(reqs.length === 3 && new Set(reqs.map((e) => e.group?.split(" ")[0])).size === 3,
    `${what}: the Next went as one request per group: ${JSON.stringify(reqs)}`);

  // Reserve moves each key to its own range (1000, 2000, ... above), then
  // Current, the Next spanning every group, Current again; then the Next
  // over gRPC-Web. Taken again (at most 3 times) when leadership moved
  // meanwhile, as on a loaded machine: an answer may then come forwarded.
  let r;
  const measure = async () => {
    r = await page.evaluate(async ({ unique, multi }) => {
      const c = window.e2e.clients.connect;
      window.e2e.log.length = 0;
      const fwd = c.routing().forwarded;
      for (const [i, k] of unique.entries()) await c.reserve("default", k, 1000 * (i + 1));
      const before = await c.current("default", unique);
      const log0 = window.e2e.log.length;
      const vals = await c.next("default", multi);
      const nextLog = window.e2e.log.slice(log0);
      const after = await c.current("default", unique);
      const s = (xs) => xs.map(String);
      return { before: s(before), vals: s(vals), after: s(after), nextLog, log: [...window.e2e.log], forwarded: c.routing().forwarded - fwd };
    }, { unique, multi });
    log(`Next ${JSON.stringify(multi)} → ${JSON.stringify(r.vals)}`);
    // Values: per key increasing in the keys' order, above the key's Current
    // before, the last one its Current after (so each value sits at its key).
    unique.forEach((k, i) => {
      const got = multi.flatMap((m, p) => (m === k ? [BigInt(r.vals[p])] : []));
      const [before, after] = [BigInt(r.before[i]), BigInt(r.after[i])];
      assert(before >= BigInt(1000 * (i + 1)), `key ${k}: Current ${before} after reserving ${1000 * (i + 1)}`);
      assert(got[0] > before && got.every((v, j) => j === 0 || v > got[j - 1]) && got[got.length - 1] === after,
        `key ${k}: values ${got} in the call's order, above ${before}, the last being Current ${after}`);
    });
    for (const e of r.log) direct(e, "connect");
    assert(r.forwarded === 0, `no answer came forwarded (${r.forwarded})`);
    oneRequestPerGroup(r.nextLog, "connect");
    assert(r.log.length === unique.length + 3 + 3 + 3, `${r.log.length} requests: a Reserve per key, 3 per Current and Next`);
    log(`routed: ${r.log.length} requests, each to its group's leader; the Next's: ${r.nextLog.map((e) => `${e.group.split(" ")[0]}→${e.servedBy}`).join(" ")}`);

    const w = await nextAgain("grpcWeb", "gRPC-Web");
    oneRequestPerGroup(w, "gRPC-Web");
    for (const e of w) direct(e, "gRPC-Web");
    log(`gRPC-Web: the Next's: ${w.map((e) => `${e.group.split(" ")[0]}→${e.servedBy}`).join(" ")}`);
  };
  // The Next again from another client: values per key increasing, above
  // the connect client's last Current; returns its requests.
  const nextAgain = async (client, what) => {
    const w = await page.evaluate(async ({ client, multi }) => {
      window.e2e.log.length = 0;
      const vals = await window.e2e.clients[client].next("default", multi);
      return { vals: vals.map(String), log: [...window.e2e.log] };
    }, { client, multi });
    unique.forEach((k, i) => {
      const got = multi.flatMap((m, p) => (m === k ? [BigInt(w.vals[p])] : []));
      assert(got[0] > BigInt(r.after[i]) && got.every((v, j) => j === 0 || v > got[j - 1]), `${what}: key ${k} values ${got}`);
    });
    return w.log;
  };
  for (let round = 1; ; round++) {
    await tablesAgree();
    const before = (await clusterLeaders()).terms;
    try {
      await measure();
      break;
    } catch (e) {
      const after = (await clusterLeaders()).terms;
      if (round === 3 || after === before) throw e;
      log(`leadership moved during the measurement (${before} → ${after}), again: ${e.message}`);
    }
  }
  assert((await page.evaluate(() => window.e2e.clients.whole.routing().groups.length)) === 0, "no table with routing disabled");

  // Routing disabled: the call goes whole to the page's node.
  const w = await nextAgain("whole", "routing disabled");
  assert(w.length === 1 && w[0].node === `http://${home.api}` && w[0].group === null,
    `routing disabled: one whole request to ${home.api}, no Seqd-Group: ${JSON.stringify(w)}`);
  log("routing disabled: the call went whole to the page's node, and its answer named no group");

  // Coalescing: 32 concurrent callers each make 6 Next calls in turn (of
  // two or three of the keys, over the groups): fewer requests than calls,
  // each request of one group's keys, no value twice per key, a key named
  // twice in a call gets increasing values, and a call that returned before
  // another began got the smaller value of every key both named.
  const co = await page.evaluate(async (keys) => {
    const c = window.e2e.clients.connect;
    window.e2e.log.length = 0;
    const s0 = c.batchStats();
    let clock = 0;
    const calls = [];
    await Promise.all(Array.from({ length: 32 }, async (_, w) => {
      for (let i = 0; i < 6; i++) {
        const ks = [keys[(w + i) % keys.length], keys[(w + 2 * i + 1) % keys.length]];
        if (i % 3 === 0) ks.push(ks[0]);
        const start = clock++;
        const vals = await c.next("default", ks);
        calls.push({ start, end: clock++, keys: ks, vals: vals.map(String) });
      }
    }));
    const s1 = c.batchStats();
    return { calls, shares: s1.calls - s0.calls, requests: s1.requests - s0.requests, log: [...window.e2e.log] };
  }, unique);
  const coalesced = co.log.filter((e) => e.method === "Next");
  log(`coalescing: ${co.calls.length} concurrent Next calls (${co.shares} group shares) in ${co.requests} requests ` +
    `(${coalesced.length} sent, retries included; up to ${Math.max(...coalesced.map((e) => e.keys?.length ?? 0))} keys in one)`);
  assert(co.requests < co.calls.length && co.requests < co.shares,
    `coalescing: ${co.calls.length} calls (${co.shares} shares) took ${co.requests} requests`);
  for (const e of coalesced) {
    assert(e.keys && new Set(e.keys.map((k) => groupOf.get(k))).size === 1, `coalescing: a request of one group's keys: ${JSON.stringify(e)}`);
  }
  const valsOf = (call, k) => call.keys.flatMap((x, p) => (x === k ? [BigInt(call.vals[p])] : []));
  for (const k of unique) {
    const all = co.calls.flatMap((call) => valsOf(call, k));
    assert(new Set(all).size === all.length, `coalescing: key ${k} got no value twice`);
  }
  for (const a of co.calls) {
    for (const k of new Set(a.keys)) {
      const va = valsOf(a, k);
      assert(va.every((v, j) => j === 0 || v > va[j - 1]), `coalescing: key ${k} named twice in a call got ${va}`);
      for (const b of co.calls) {
        if (a.end >= b.start || !b.keys.includes(k)) continue;
        assert(va[va.length - 1] < valsOf(b, k)[0],
          `coalescing: key ${k}: ${va} returned before the call that got ${valsOf(b, k)} began`);
      }
    }
  }
  await page.screenshot({ path: path.join(out, "ui-groups.png"), fullPage: true });
  await page.close();
}

async function stopAll() {
  for (const { child } of procs) if (child.exitedWith === undefined) child.kill("SIGTERM");
  const deadline = Date.now() + 10000;
  while (procs.some(({ child }) => child.exitedWith === undefined) && Date.now() < deadline) await sleep(100);
  for (const { child } of procs) if (child.exitedWith === undefined) child.kill("SIGKILL");
}

let failed = false;
try {
  await main();
} catch (e) {
  failed = true;
  console.error(`FAIL: ${e.stack || e}`);
  for (const { name } of procs) {
    try {
      const lines = readFileSync(path.join(out, `${name}.log`), "utf8").trimEnd().split("\n");
      console.error(`--- ${name}.log (last 15 lines)\n${lines.slice(-15).join("\n")}`);
    } catch {}
  }
} finally {
  await stopAll();
  for (const n of ["n1", "n2", "n3", "n4", "g1", "g2", "g3"]) rmSync(path.join(work, n), { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
