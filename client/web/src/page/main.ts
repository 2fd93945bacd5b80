// The status page served by seqd at /ui/ (ui/static/index.html loads this
// bundle as app.js). It talks to the node that served it (or to ?api=URL)
// with the browser client over Connect or gRPC-Web, polls ClusterStatus every
// second (and shows its raft groups when the cluster runs several), lists spaces, flake namespaces and their workers every ten seconds
// (and whenever the routing version changes), and lets an operator try Next
// and Current on a key.

import {
  Code,
  ConnectError,
  createSeqdClient,
  leaderHint,
  type ClusterStatusResponse,
  type GroupRoute,
  type Namespace,
  type Node,
  type SeqdClient,
  type Space,
  type TransportKind,
  type Worker,
} from "../index.js";
import { IssuedRate, type RateReading } from "./metrics.js";
import { raftRefusal } from "./refusal.js";
import { describeCallError } from "./unreachable.js";

const POLL_MS = 1000;
// Spaces, namespaces and workers are listed every LIST_EVERY polls.
const LIST_EVERY = 10;
// At most this many worker rows per namespace (held workers first); the rest
// are counted in a last row.
const MAX_WORKER_ROWS = 10;

const params = new URLSearchParams(location.search);
// The page lives at <node>/ui/, so by default the API is the page's origin.
const base = (params.get("api") ?? location.origin).replace(/\/+$/, "");

function $(id: string): HTMLElement {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} missing from index.html`);
  return el;
}

function el<K extends keyof HTMLElementTagNameMap>(tag: K, text?: string, cls?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function initialTransport(): TransportKind {
  const p = params.get("transport") ?? localStorage.getItem("seqd.transport");
  return p === "grpc-web" ? "grpc-web" : "connect";
}

let kind: TransportKind = initialTransport();
let token = sessionStorage.getItem("seqd.token") ?? "";
// The poller fails fast (one attempt, short deadline) and simply tries again a
// second later; operator calls retry through a failover like the Go client.
// Both talk to the page's node only (no routing by raft group): the other
// nodes may not allow the page's origin, and that node forwards.
let poller: SeqdClient;
let caller: SeqdClient;

function makeClients(): void {
  poller = createSeqdClient(base, { transport: kind, token, timeoutMs: 2000, retryForMs: 0, disableRouting: true });
  caller = createSeqdClient(base, { transport: kind, token, timeoutMs: 3000, retryForMs: 10000, disableRouting: true });
  document.body.dataset.transport = kind;
  listsDue = true; // a new token or protocol: list again at once
}

// ---- cluster view -----------------------------------------------------------

let lastLeader: string | undefined;
let lastVersion = -1n;
let lastOk = 0;
let polls = 0;
let listsDue = true;
const rate = new IssuedRate();
const rateHistory: number[] = [];
let spaces: Space[] = [];

function fmtDuration(d: Node["lastContact"]): string {
  if (!d) return "—";
  const ms = Number(d.seconds) * 1000 + d.nanos / 1e6;
  if (ms === 0) return "0";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(1)} s`;
}

function fmtRate(r: number | undefined): string {
  if (r === undefined) return "—";
  if (r >= 10000) return `${(r / 1000).toFixed(1)}k`;
  if (r >= 100) return r.toFixed(0);
  return r.toFixed(1);
}

function pill(text: string, cls: string): HTMLSpanElement {
  return el("span", text, `pill ${cls}`);
}

function event(text: string, cls = ""): void {
  const list = $("events");
  const li = el("li", undefined, cls);
  li.append(el("time", new Date().toLocaleTimeString()), document.createTextNode(" " + text));
  list.prepend(li);
  while (list.children.length > 30) list.lastElementChild?.remove();
}

function renderStatus(st: ClusterStatusResponse, reading?: RateReading): void {
  const leader = st.leaderId;
  const leaderEl = $("leader");
  leaderEl.textContent = leader || "none";
  leaderEl.dataset.leader = leader;
  $("leader-card").classList.toggle("warn", !leader);
  $("leader-addr").textContent = leader ? st.leaderApiAddr : "election in progress";
  if (lastLeader !== undefined && leader !== lastLeader) {
    event(
      leader ? `leader ${lastLeader || "none"} → ${leader} (term ${st.term})` : `leader ${lastLeader} lost (term ${st.term})`,
      leader ? "" : "bad",
    );
    const card = $("leader-card");
    card.classList.remove("flash");
    void card.offsetWidth; // restart the animation
    card.classList.add("flash");
  } else if (lastLeader === undefined && leader) {
    event(`leader ${leader} (term ${st.term})`);
  }
  lastLeader = leader;

  $("term").textContent = String(st.term);
  $("version").textContent = `routing version ${st.version}`;
  $("answered").textContent = st.nodeId || "—";

  const tbody = $("nodes").querySelector("tbody")!;
  const rows: HTMLTableRowElement[] = [];
  const nodes = [...st.nodes].sort((a, b) => a.id.localeCompare(b.id));
  for (const n of nodes) {
    const tr = el("tr");
    tr.dataset.node = n.id;
    tr.dataset.state = n.raftState;
    if (n.id === leader) tr.className = "is-leader";
    const id = el("td");
    id.append(el("strong", n.id));
    if (n.id === st.nodeId) id.append(el("span", " (this node)", "muted"));
    const state = el("td");
    state.append(pill(n.raftState || "?", `st-${n.raftState || "unknown"}`));
    const serving = el("td");
    serving.append(n.serving ? pill("serving", "ok") : el("span", "no", "muted"));
    const member = el("td", n.inConfiguration ? (n.voter ? "voter" : "non-voter") : "no (gossip only)");
    if (n.raftState !== "unreachable") {
      // Not admitted (yet), in every group or some, or fenced (see seqd status).
      const refusing = raftRefusal(n);
      if (refusing) member.append(" ", pill(refusing, "warn"));
      if (n.diskFull) member.append(" ", pill("disk full", "warn"));
    }
    const lease = reading?.lease.get(n.id);
    rows.push(tr);
    tr.append(
      id,
      state,
      serving,
      member,
      el("td", String(n.term), "num"),
      el("td", String(n.appliedIndex), "num"),
      el("td", n.raftState === "unreachable" ? "—" : fmtDuration(n.lastContact), "num"),
      el("td", lease === undefined || lease <= 0 ? "—" : `${lease.toFixed(2)} s`, "num"),
      el("td", n.apiAddr, "mono"),
      el("td", n.raftAddr, "mono"),
    );
  }
  tbody.replaceChildren(...rows);
  renderGroups(st.groups);
  $("node-count").textContent = `${nodes.length} node${nodes.length === 1 ? "" : "s"}, ${
    nodes.filter((n) => n.voter).length
  } voters`;

  if (reading) {
    // Only leaders issue values: without the leader's /metrics the sum means nothing.
    const known = !leader || reading.rated.has(leader);
    $("rate").textContent = known ? fmtRate(reading.perSecond) : "—";
    $("rate-src").textContent = known
      ? `/metrics of ${reading.scraped} of ${reading.of} nodes`
      : `leader ${leader}'s /metrics is not reachable from this page (CORS: seqd --cors-origin)`;
    rateHistory.push(known ? (reading.perSecond ?? 0) : 0);
    while (rateHistory.length > 60) rateHistory.shift();
    drawSpark();
  }
}

// ---- raft groups ------------------------------------------------------------

/** The group's leader differs from the voter leadership is balanced to. */
function offPreferred(g: GroupRoute): boolean {
  return g.preferredLeader !== "" && g.leaderId !== "" && g.leaderId !== g.preferredLeader;
}

/** "groups led: n1 2, n2 2, n3 2" from the rows: every leader and voter, and the groups without a leader. */
function groupsLed(groups: GroupRoute[]): string {
  const led = new Map<string, number>();
  for (const g of groups) for (const v of g.voters) if (!led.has(v)) led.set(v, 0);
  let leaderless = 0;
  for (const g of groups) {
    if (g.leaderId) led.set(g.leaderId, (led.get(g.leaderId) ?? 0) + 1);
    else leaderless++;
  }
  const parts = [...led].sort(([a], [b]) => a.localeCompare(b)).map(([id, n]) => `${id} ${n}`);
  return `groups led: ${parts.join(", ") || "none"}${leaderless ? ` · ${leaderless} without a leader` : ""}`;
}

// The panel is shown only for a cluster of several raft groups: with one, the
// cards and the nodes table above already say it all.
function renderGroups(list: GroupRoute[]): void {
  const panel = $("groups-panel");
  const tbody = $("groups").querySelector("tbody")!;
  if (list.length <= 1) {
    panel.hidden = true;
    tbody.replaceChildren();
    return;
  }
  const groups = [...list].sort((a, b) => a.group - b.group);
  tbody.replaceChildren(
    ...groups.map((g) => {
      const tr = el("tr");
      tr.dataset.group = String(g.group);
      tr.dataset.leader = g.leaderId;
      tr.dataset.preferred = g.preferredLeader;
      const off = offPreferred(g);
      if (off) {
        tr.className = "off-preferred";
        tr.title = `led by ${g.leaderId}, not by its preferred leader ${g.preferredLeader}`;
      }
      const leader = el("td", undefined, "mono");
      if (g.leaderId) leader.append(el("strong", g.leaderId));
      else leader.append(pill("none", "st-candidate"));
      if (g.leaderId && g.leaderApiAddr) leader.title = g.leaderApiAddr;
      const serving = el("td");
      serving.append(g.serving ? pill("yes", "ok") : el("span", "no", "muted"));
      const preferred = el("td", undefined, "mono");
      preferred.append(
        g.preferredLeader ? document.createTextNode(g.preferredLeader) : el("span", "—", "muted"),
      );
      if (off) preferred.append(el("span", " ≠ leader", "warn-text"));
      const slots = el("td", `${g.firstSlot}-${g.endSlot - 1}`, "num mono");
      slots.title = `slots [${g.firstSlot}, ${g.endSlot}): ${g.endSlot - g.firstSlot} slots`;
      tr.append(
        el("td", String(g.group), "num"),
        leader,
        serving,
        el("td", String(g.term), "num"),
        preferred,
        slots,
        el("td", g.voters.length ? [...g.voters].sort().join(", ") : "—", "mono"),
      );
      return tr;
    }),
  );
  $("groups-led").textContent = groupsLed(groups);
  const moved = groups.filter(offPreferred).length;
  $("group-count").textContent = `${groups.length} groups${moved ? `, ${moved} not on their preferred leader` : ""}`;
  panel.hidden = false;
}

function drawSpark(): void {
  const svg = $("spark");
  const line = svg.querySelector("polyline")!;
  const max = Math.max(1, ...rateHistory);
  const w = 120;
  const h = 28;
  const step = w / 59;
  const off = 60 - rateHistory.length;
  line.setAttribute(
    "points",
    rateHistory.map((v, i) => `${((off + i) * step).toFixed(1)},${(h - 1 - (v / max) * (h - 2)).toFixed(1)}`).join(" "),
  );
}

function renderSpaces(list: Space[]): void {
  spaces = list;
  const tbody = $("spaces").querySelector("tbody")!;
  tbody.replaceChildren(
    ...list.map((s) => {
      const tr = el("tr");
      tr.append(el("td", s.name, "mono"), el("td", String(s.step), "num"), el("td", String(s.sectionSize), "num"));
      return tr;
    }),
  );
  const sel = $("space") as HTMLSelectElement;
  const keep = sel.value || "default";
  sel.replaceChildren(...list.map((s) => el("option", s.name)));
  if (list.some((s) => s.name === keep)) sel.value = keep;
}

function renderNamespaces(list: Namespace[]): void {
  const tbody = $("namespaces").querySelector("tbody")!;
  tbody.replaceChildren(
    ...list.map((n) => {
      const l = n.layout;
      const tr = el("tr");
      tr.append(
        el("td", n.name, "mono"),
        el("td", l ? `${l.timeBits}/${l.workerBits}/${l.sequenceBits} · ${l.unitMs} ms` : "?", "mono"),
        el("td", l?.obfuscation || "none"),
        el("td", new Date(Number(n.endUnixMs)).getUTCFullYear().toString(), "num"),
      );
      return tr;
    }),
  );
}

// ---- flake workers ----------------------------------------------------------

/** "1.2 s", "850 ms", "4 min", "3 h", "2 d" for a non-negative duration. */
function fmtSpan(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  if (ms < 86_400_000) return `${Math.round(ms / 3_600_000)} h`;
  return `${Math.round(ms / 86_400_000)} d`;
}

/** An error of an admin call, with what to do about a missing token. */
function adminError(err: unknown): string {
  const ce = ConnectError.from(err);
  const text = describeCallError(ce, base, location.origin);
  return ce.code === Code.Unauthenticated
    ? `${text} — this node requires its admin token: enter it under “Bearer token” at the bottom of the page`
    : text;
}

type WorkerState = "held" | "lapsed" | "free";

// A held worker whose holder has not renewed within its lease (judged by the
// browser's clock against the leader's time of the renewal) is shown as
// lapsed: its holder has stopped issuing from it, and the leader may hand it
// to another holder once two leases have passed since that renewal.
function workerState(w: Worker, now: number): WorkerState {
  if (!w.held) return "free";
  return Number(w.renewedUnixMs) + w.leaseMs >= now ? "held" : "lapsed";
}

function workerRow(w: Worker, ns: Namespace, now: number): HTMLTableRowElement {
  const state = workerState(w, now);
  const tr = el("tr");
  tr.dataset.worker = String(w.id);
  tr.dataset.state = state;
  tr.dataset.label = w.label;
  tr.dataset.token = String(w.token);

  const holder = el("td", undefined, "mono holder");
  if (state === "free") holder.append(el("span", w.label ? `last: ${w.label}` : "—", "muted"));
  else holder.textContent = w.label || "?";
  if (w.history.length) {
    holder.title = "uses, oldest first:\n" + w.history.map((u) => `${u.label || "?"} (token ${u.token})`).join("\n");
  }

  // hwm counts the layout's time units from its epoch: the end of the last
  // range granted, normally some seconds ahead of now.
  const l = ns.layout;
  const hwm = el("td", undefined, "mono");
  if (l) {
    const at = Number(l.epochUnixMs) + Number(w.hwm) * l.unitMs;
    const ahead = at - now;
    hwm.append(
      document.createTextNode(new Date(at).toISOString()),
      el("span", ` ${ahead >= 0 ? "+" : "−"}${fmtSpan(Math.abs(ahead))}`, "muted"),
    );
    hwm.title = `hwm ${w.hwm} units of ${l.unitMs} ms`;
  } else {
    hwm.textContent = String(w.hwm);
  }

  const renewed = Number(w.renewedUnixMs);
  const lease = el("td", undefined, "num");
  if (state === "held") {
    lease.textContent = `${fmtSpan(Math.max(0, renewed + w.leaseMs - now))} left of ${fmtSpan(w.leaseMs)}`;
  } else if (state === "lapsed") {
    lease.textContent = `lapsed ${fmtSpan(now - renewed - w.leaseMs)} ago`;
  } else {
    lease.append(el("span", renewed ? `renewed ${fmtSpan(Math.max(0, now - renewed))} ago` : "—", "muted"));
  }
  if (renewed) lease.title = `last grant or renewal ${new Date(renewed).toISOString()} (leader's clock)`;

  const pillCls = state === "held" ? "ok" : state === "lapsed" ? "st-candidate" : "";
  const st = el("td");
  st.append(pill(state, pillCls));
  tr.append(el("td", String(w.id), "num"), st, holder, el("td", String(w.token), "num"), hwm, lease);
  return tr;
}

function workersTable(ns: Namespace, workers: Worker[], now: number): HTMLElement {
  const rank = (w: Worker) => (workerState(w, now) === "free" ? 1 : 0);
  const sorted = [...workers].sort((a, b) => rank(a) - rank(b) || a.id - b.id);
  const shown = sorted.slice(0, MAX_WORKER_ROWS);
  const rest = sorted.slice(MAX_WORKER_ROWS);
  const table = el("table", undefined, "workers");
  const head = el("thead");
  const hr = el("tr");
  hr.append(
    el("th", "Worker", "num"),
    el("th", "State"),
    el("th", "Holder"),
    el("th", "Token", "num"),
    el("th", "HWM (ids up to)"),
    el("th", "Lease", "num"),
  );
  head.append(hr);
  const body = el("tbody");
  body.append(...shown.map((w) => workerRow(w, ns, now)));
  if (rest.length) {
    const held = rest.filter((w) => w.held).length;
    const tr = el("tr", undefined, "more");
    const td = el(
      "td",
      `… and ${rest.length} more worker${rest.length === 1 ? "" : "s"} (${held} held, ${rest.length - held} free): seqd id workers --namespace ${ns.name}`,
      "muted",
    );
    td.colSpan = 6;
    tr.append(td);
    body.append(tr);
  }
  table.append(head, body);
  return table;
}

function renderWorkers(list: Namespace[], results: PromiseSettledResult<Worker[]>[]): void {
  const now = Date.now();
  const blocks = list.map((ns, i) => {
    const r = results[i];
    const div = el("div", undefined, "ns-workers");
    div.dataset.namespace = ns.name;
    const h = el("h3");
    h.append(el("span", ns.name, "mono"));
    div.append(h);
    if (r.status === "rejected") {
      div.append(el("p", `workers: ${adminError(r.reason)}`, "note bad"));
      return div;
    }
    const ws = r.value;
    const held = ws.filter((w) => w.held).length;
    h.append(el("span", ` ${held} held · ${ws.length - held} free (of workers ever used)`, "muted"));
    if (ws.length === 0) div.append(el("p", "no worker used yet", "note muted"));
    else div.append(workersTable(ns, ws, now));
    return div;
  });
  const box = $("workers");
  box.classList.remove("bad");
  if (!blocks.length) box.replaceChildren(el("p", "no flake namespace yet", "note muted"));
  else box.replaceChildren(...blocks);
  $("workers-note").textContent = `as of ${new Date(now).toLocaleTimeString()}`;
}

function renderWorkersError(err: unknown): void {
  const box = $("workers");
  box.classList.add("bad");
  box.replaceChildren(el("p", `cannot list workers: ${adminError(err)}`, "note bad"));
  $("workers-note").textContent = `as of ${new Date().toLocaleTimeString()}`;
}

async function refreshLists(client: SeqdClient): Promise<void> {
  client.listSpaces().then(renderSpaces, () => {});
  let list: Namespace[];
  try {
    list = await client.listNamespaces();
  } catch (err) {
    if (client === poller) {
      renderWorkersError(err);
      listsDue = true; // try again at the next poll
    }
    return;
  }
  if (client !== poller) return;
  renderNamespaces(list);
  const results = await Promise.allSettled(list.map((n) => client.listWorkers(n.name)));
  if (client !== poller) return;
  renderWorkers(list, results);
  if (results.some((r) => r.status === "rejected")) listsDue = true;
}

function setConn(ok: boolean, text: string): void {
  const c = $("conn");
  c.textContent = text;
  c.className = `conn ${ok ? "ok" : "bad"}`;
  document.body.classList.toggle("stale", !ok);
}

function metricsTargets(st: ClusterStatusResponse): Map<string, string> {
  const scheme = new URL(base).protocol;
  const t = new Map<string, string>();
  for (const n of st.nodes) {
    if (n.id === st.nodeId) t.set(n.id, `${base}/metrics`);
    else if (n.apiAddr && n.raftState !== "unreachable") t.set(n.id, `${scheme}//${n.apiAddr}/metrics`);
  }
  return t;
}

async function poll(): Promise<void> {
  const started = performance.now();
  const current = poller;
  try {
    const st = await current.clusterStatus();
    if (current !== poller) return; // the transport changed meanwhile
    lastOk = Date.now();
    setConn(true, `live · ${kind} · ${Math.round(performance.now() - started)} ms`);
    if (listsDue || polls % LIST_EVERY === 0 || st.version !== lastVersion) {
      listsDue = false;
      void refreshLists(current);
    }
    lastVersion = st.version;
    polls++;
    renderStatus(st);
    const reading = await rate.scrape(metricsTargets(st), `${base}/metrics`);
    renderStatus(st, reading);
  } catch (err) {
    if (current !== poller) return;
    const hint = leaderHint(err);
    const age = lastOk ? ` · last update ${Math.round((Date.now() - lastOk) / 1000)} s ago` : "";
    setConn(false, `${describeCallError(err, base, location.origin)}${hint ? ` (leader ${hint.id})` : ""}${age}`);
    // Every admin call fails alike without the token: say so where the lists are.
    if (ConnectError.from(err).code === Code.Unauthenticated) renderWorkersError(err);
  } finally {
    if (current === poller) setTimeout(poll, Math.max(0, POLL_MS - (performance.now() - started)));
  }
}

// ---- try it -----------------------------------------------------------------

async function tryCall(what: "next" | "current"): Promise<void> {
  const space = ($("space") as HTMLSelectElement).value || "default";
  const keyText = ($("key") as HTMLInputElement).value.trim();
  const out = $("result");
  let key: bigint;
  try {
    key = BigInt(keyText);
    if (key < 0n) throw new RangeError();
  } catch {
    out.className = "result bad";
    out.textContent = `"${keyText}" is not a key (an unsigned 64-bit integer)`;
    return;
  }
  out.className = "result busy";
  out.textContent = `${what}(${space}, ${key}) …`;
  const started = performance.now();
  try {
    const [v] = what === "next" ? await caller.next(space, [key]) : await caller.current(space, [key]);
    const ms = Math.round(performance.now() - started);
    out.className = "result ok";
    out.dataset.value = String(v);
    out.dataset.call = what;
    out.replaceChildren(
      el("span", `${what}(${space}, ${key}) = `),
      el("strong", String(v), "value"),
      el("span", ` · ${kind} · ${ms} ms`, "muted"),
    );
    const li = el("li");
    li.append(el("time", new Date().toLocaleTimeString()), document.createTextNode(` ${what} ${space}/${key} → ${v}`));
    $("history").prepend(li);
    while ($("history").children.length > 8) $("history").lastElementChild?.remove();
  } catch (err) {
    out.className = "result bad";
    delete out.dataset.value;
    const hint = leaderHint(err);
    out.textContent = `${what}(${space}, ${key}) failed: ${describeCallError(err, base, location.origin)}${hint ? ` (leader ${hint.id} at ${hint.addr})` : ""}`;
  }
}

async function tryID(): Promise<void> {
  const out = $("result");
  out.className = "result busy";
  out.textContent = "nextIds(default) …";
  const started = performance.now();
  try {
    const [id] = await caller.nextIds("", 1);
    const d = await caller.decode("", id);
    const ms = Math.round(performance.now() - started);
    out.className = "result ok";
    out.dataset.value = String(id);
    out.dataset.call = "id";
    const when = new Date(Number(d.unixMs)).toISOString();
    out.replaceChildren(
      el("span", "flake id = "),
      el("strong", String(id), "value"),
      el("span", ` · ${when} · worker ${d.worker} (${d.holderLabel || "?"}) · seq ${d.sequence} · ${kind} · ${ms} ms`, "muted"),
    );
    const li = el("li");
    li.append(el("time", new Date().toLocaleTimeString()), document.createTextNode(` flake id → ${id}`));
    $("history").prepend(li);
    while ($("history").children.length > 8) $("history").lastElementChild?.remove();
  } catch (err) {
    out.className = "result bad";
    delete out.dataset.value;
    out.textContent = `nextIds(default) failed: ${describeCallError(err, base, location.origin)}`;
  }
}

// ---- wiring -----------------------------------------------------------------

function start(): void {
  makeClients();
  $("endpoint").textContent = base;
  $("via").textContent = base;
  ($("metrics-link") as HTMLAnchorElement).href = `${base}/metrics`;
  for (const r of document.querySelectorAll<HTMLInputElement>('input[name="transport"]')) {
    r.checked = r.value === kind;
    r.addEventListener("change", () => {
      if (!r.checked) return;
      kind = r.value === "grpc-web" ? "grpc-web" : "connect";
      localStorage.setItem("seqd.transport", kind);
      const u = new URL(location.href);
      u.searchParams.set("transport", kind);
      history.replaceState(null, "", u);
      makeClients();
      event(`protocol switched to ${kind}`);
      void poll();
    });
  }
  const tok = $("token") as HTMLInputElement;
  tok.value = token;
  tok.addEventListener("change", () => {
    token = tok.value.trim();
    sessionStorage.setItem("seqd.token", token);
    makeClients();
    void poll();
  });
  $("try").addEventListener("submit", (e) => {
    e.preventDefault();
    const id = (e as SubmitEvent).submitter?.id;
    if (id === "id-btn") {
      void tryID();
      return;
    }
    void tryCall(id === "current-btn" ? "current" : "next");
  });
  void poll();
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();

// For debugging from the console.
Object.assign(globalThis, { seqd: { base, get client() { return caller; }, get spaces() { return spaces; } } });
