// Package @seqd/web: a small browser client for seqd over Connect or gRPC-Web.
//
//   import { createSeqdClient } from "@seqd/web";
//   const seqd = createSeqdClient("https://seqd.example:7700", { transport: "grpc-web" });
//   const [a, b] = await seqd.next("default", [42n, 7n]);   // bigint values
//
// Every uint64 is a bigint. Keys may be given as bigint, number or decimal string.
// The node at baseUrl forwards to the leader, so one address is enough (several
// may be given: calls go to the first, and move to the next when a node cannot
// be reached). Calls that fail with `unavailable` (no leader yet, a failover in
// progress) are retried with backoff for up to retryForMs: a retried Next or
// Reserve can leave a gap in a key's sequence, never a repeat.
//
// Routing by raft group. A cluster may run several raft groups, each with its
// own leader, every key belonging to one (slots.ts). The client mirrors the Go
// client (client/routing.go). Every SequenceService answer carries the
// answering leader's routing version (Seqd-Routing-Version); when it differs
// from the version of the table held, or a node answers `unavailable` with a
// leader hint, the client asks the given nodes for ClusterStatus in the
// background (calls never wait for it). When the answer has more than one
// group row and reports the slot map this client computes (SLOT_COUNT slots,
// map version SLOT_MAP_VERSION), the client keeps a per-group table: the
// number of groups, each space's section size, and per group the leader's API
// address (with the scheme of the first given URL) at the highest term seen. A
// row with a lower term than the one held never replaces it; a row with the
// same term only when it names a leader; a row with a higher term always, even
// one naming no leader (an election is under way: the leader is then
// unknown). An answer older than the table's routing version still has its
// group rows weighed so. Answers teach the table too: an answer served by one
// group carries Seqd-Group ("<group> <term>"); at a higher term than held (or
// the same, with no leader held) the group's leader becomes the address in
// Seqd-Leader when the answer has one (the node asked forwarded the call to
// it), else the node that answered; a forwarded answer from the node held as
// the group's leader replaces it at the same term too.
//
// next and current split their keys by group and send each group's share to
// its group's leader, or, when the table knows none, to the given node in use,
// which forwards it. The shares of one call run in parallel, their values are
// merged back in the keys' order, and the call succeeds or fails as a whole:
// the first share to fail cancels the others and its error is the call's
// (values taken by shares that succeeded are gaps). reserve goes to its key's
// group's leader. A space the table does not know yet is sent whole, and a
// call that succeeds on it starts a refresh. When an attempt on a group's
// leader fails with `unavailable`, a network error or a timeout, the table
// forgets that leader (keeping its term), a refresh starts, and the retry goes
// at once to the given node in use. With one group, before the first refresh,
// with another slot map, or with disableRouting (for a client that cannot
// reach the nodes' advertised addresses, behind a proxy, or a page whose
// origin the other nodes do not allow: see seqd serve --cors-origin), calls go
// whole to the given nodes. Every other call (IdService, AdminService) goes
// to the given nodes.
//
// Coalescing, as in the Go client (client/coalesce.go; coalesce.ts here).
// Concurrent next calls, and concurrent current calls, share requests per
// space and group (per space without a table): a call made while no request
// of its batcher is in flight is sent at once, on its own (an idle client
// adds no latency); calls made while one is in flight wait and go together
// in the next request, in the order they were made (maxInFlight requests at
// a time, default 4, spaced a round trip / maxInFlight apart; at most
// maxBatchKeys keys per request, default 1000; a call waits at most
// maxBatchWaitMs, default 5, for a free slot). Each group's share of a call
// joins its group's batcher. Each call gets exactly its own values, a key
// named twice gets two increasing values, and a call that returned before
// another began gets the smaller value for the same key. A request is
// retried as a whole, and its failure is the failure of every call in it
// (after resource_exhausted each call is sent again on its own, so that the
// error reaches only the calls whose keys caused it). disableCoalescing sends
// every call (every share) as its own request; batchStats() counts calls and
// requests.

import { Code, ConnectError, createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import {
  AdminService,
  SequenceService,
  type ClusterStatusResponse,
  type GroupRoute,
  type Node,
  type Space,
} from "./gen/seq/v1/seq_pb.js";
import {
  IdService,
  type DecodeResponse,
  type GetLayoutResponse,
  type Namespace,
  type Worker,
  type WorkerUse,
} from "./gen/seq/v1/id_pb.js";
import {
  Batcher,
  DEFAULT_MAX_BATCH_KEYS,
  DEFAULT_MAX_BATCH_WAIT_MS,
  DEFAULT_MAX_IN_FLIGHT,
  type BatchStats,
  type CoalesceLimits,
} from "./coalesce.js";
import { applyGroups, learnGroup, spaceName, splitShares, type GroupTable } from "./routing.js";
import { Generations } from "./generation.js";
import { createSegment, type Segment, type SegmentOptions, type SegmentStats } from "./segment.js";
import { groupOfKey } from "./slots.js";

export { Code, ConnectError };
export type { BatchStats };
export type { Segment, SegmentOptions, SegmentStats };
export type { ClusterStatusResponse, GroupRoute, Node, Space, DecodeResponse, GetLayoutResponse, Namespace, Worker, WorkerUse };
export { DEFAULT_SPACE, SLOT_COUNT, SLOT_MAP_VERSION, groupOfKey, slotGroup, slotOf } from "./slots.js";

export type TransportKind = "connect" | "grpc-web";

export interface SeqdClientOptions {
  /** Wire protocol: "connect" (default) or "grpc-web". */
  transport?: TransportKind;
  /** Connect only: binary protobuf instead of JSON (gRPC-Web is always binary). Default false. */
  binary?: boolean;
  /** Bearer token sent as Authorization on every call (seqd --token). */
  token?: string;
  /** Deadline of each attempt in milliseconds. Default 5000. */
  timeoutMs?: number;
  /** How long to keep retrying `unavailable` errors, in milliseconds. 0 disables retries. Default 10000. */
  retryForMs?: number;
  /** A fetch implementation (tests, service workers). Default globalThis.fetch. */
  fetch?: typeof globalThis.fetch;
  /**
   * Send every call to the given node URLs only, whole (no routing table, no
   * ClusterStatus refreshes): for a client behind a proxy, or one that may not
   * call the nodes' advertised addresses (another origin without CORS). Like
   * the Go client's Options.DisableRouting. Default false.
   */
  disableRouting?: boolean;
  /**
   * Send every next and current call (every group's share of one) as its own
   * request instead of coalescing concurrent calls (see above). Like the Go
   * client's Options.DisableCoalescing. Default false.
   */
  disableCoalescing?: boolean;
  /** The most keys of one coalesced request (default 1000, at most 10000); a call or share with more is sent on its own. */
  maxBatchKeys?: number;
  /** Coalesced requests in flight per space, kind of call and group. Default 4. */
  maxInFlight?: number;
  /**
   * How long a queued call waits for a free slot, in milliseconds: after
   * this long its request is sent even if maxInFlight requests are in
   * flight. Default (or 0) 5; negative: wait for a slot.
   */
  maxBatchWaitMs?: number;
}

export type Key = bigint | number | string;

/** One group's row of the client's routing table. */
export interface GroupRouting {
  /** Base URL of the group's leader ("": unknown, calls go to the given node in use). */
  leader: string;
  /** The highest term seen for the group. */
  term: bigint;
}

/** What a call learnt about the cluster from response headers and error metadata. */
export interface RoutingInfo {
  /** Seqd-Routing-Version of the last successful sequence call (0n before any). */
  routingVersion: bigint;
  /** Leader hint (Seqd-Leader-Id, Seqd-Leader) of the last `unavailable` error, if any. */
  leaderId: string;
  leaderAddr: string;
  /** The routing version of the last ClusterStatus the table was read from (0n before the first refresh). */
  tableVersion: bigint;
  /** Routing refreshes (ClusterStatus) that succeeded. */
  refreshes: number;
  /** SequenceService answers a node forwarded to the leader (they carry Seqd-Leader). */
  forwarded: number;
  /** The per-group table by group; empty with one group, before the first refresh, with another slot map, or routing disabled. */
  groups: GroupRouting[];
  /** The newest cluster generation the client met ("lineage/number/cluster"; "" before any answer, or from servers of builds before generations). */
  generation: string;
  /** The given node URL the calls that are not routed go to. */
  node: string;
}

export interface SeqdClient {
  /** The first node URL given. */
  readonly baseUrl: string;
  readonly transport: TransportKind;
  /** One new value per key; a key listed twice gets two increasing values. */
  next(space: string, keys: Key[]): Promise<bigint[]>;
  /** count consecutive values for key: first .. first+count-1. */
  reserve(space: string, key: Key, count: number): Promise<{ first: bigint; count: number }>;
  /**
   * A segment of key (Leaf-segment mode, segment.ts): values handed out from
   * reserved ranges in memory, with the next range prefetched, so that it
   * keeps issuing while the cluster is unreachable. The Go client's rules.
   */
  segment(space: string, key: Key, options?: SegmentOptions): Segment;
  /** The current value per key (0n: none issued yet); no side effects. */
  current(space: string, keys: Key[]): Promise<bigint[]>;
  /** count (1 to 10000) flake ids of namespace ("" is "default"): unique across the cluster, strictly increasing unless the namespace is obfuscated. */
  nextIds(namespace: string, count: number): Promise<bigint[]>;
  /** An id's time, worker, sequence and holder label. */
  decode(namespace: string, id: bigint): Promise<DecodeResponse>;
  /** The namespace's layout, for decoding offline. */
  getLayout(namespace: string): Promise<GetLayoutResponse>;
  /** The flake namespaces (an admin call). */
  listNamespaces(): Promise<Namespace[]>;
  /** The namespace's workers ever used ("" is "default"), with their holders (an admin call). */
  listWorkers(namespace: string): Promise<Worker[]>;
  /** Leader, term, routing version and every node, as seen by the given node in use. */
  clusterStatus(): Promise<ClusterStatusResponse>;
  listSpaces(): Promise<Space[]>;
  createSpace(name: string, step?: bigint | number, sectionSize?: bigint | number): Promise<{ space?: Space; created: boolean }>;
  /** Routing information from the latest calls, and the routing table. */
  routing(): RoutingInfo;
  /** The coalescing counters since the client was created (a copy). */
  batchStats(): BatchStats;
}

/** The leader hint carried by an `unavailable` error, when the server knew the leader. */
export function leaderHint(err: unknown): { id: string; addr: string } | undefined {
  const ce = ConnectError.from(err);
  const id = ce.metadata.get("Seqd-Leader-Id") ?? "";
  const addr = ce.metadata.get("Seqd-Leader") ?? "";
  return id || addr ? { id, addr } : undefined;
}

/** A short human-readable form of an error: "unavailable: no leader". */
export function describeError(err: unknown): string {
  const ce = ConnectError.from(err);
  return `${Code[ce.code].replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase()}: ${ce.rawMessage}`;
}

/** seqd.MaxKeys: the most keys one Next or Current call may name (a larger call is sent whole, for the server to refuse). */
const MAX_KEYS = 10000;

/** The clients of one node. */
interface Conn {
  seq: Client<typeof SequenceService>;
  admin: Client<typeof AdminService>;
  ids: Client<typeof IdService>;
}

/**
 * A client for the nodes at baseUrl: one URL ("http://host:port") or several
 * of the same cluster.
 */
export function createSeqdClient(baseUrl: string | string[], options: SeqdClientOptions = {}): SeqdClient {
  const kind: TransportKind = options.transport ?? "connect";
  const timeoutMs = options.timeoutMs ?? 5000;
  const retryForMs = options.retryForMs ?? 10000;
  const routed = !options.disableRouting;
  const info = { routingVersion: 0n, leaderId: "", leaderAddr: "" };
  const given = (Array.isArray(baseUrl) ? baseUrl : [baseUrl]).map(trimUrl).filter((u) => u !== "");
  if (given.length === 0) throw new TypeError("createSeqdClient: no node URL");
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(given[0])?.[0] ?? "http://";
  let cur = 0; // index into given: the node calls go to when not routed
  const limits: CoalesceLimits = {
    maxBatchKeys: Math.min(positive(options.maxBatchKeys) ?? DEFAULT_MAX_BATCH_KEYS, MAX_KEYS),
    maxInFlight: positive(options.maxInFlight) ?? DEFAULT_MAX_IN_FLIGHT,
    maxBatchWaitMs: options.maxBatchWaitMs || DEFAULT_MAX_BATCH_WAIT_MS,
  };
  const stats: BatchStats = { calls: 0, requests: 0, keys: 0 };
  const batchers = new Map<string, Batcher>();

  // The routing table (see above).
  let table: GroupTable | undefined;
  let tableVersion = 0n;
  let refreshes = 0;
  let forwarded = 0;
  let refreshing = false;

  // The base URL of an API address from the cluster: the given URLs' scheme.
  const urlOf = (addr: string): string => trimUrl(addr.includes("://") ? addr : scheme + addr);

  const generations = new Generations();
  const observe = (url: string): Interceptor => (next) => async (req) => {
    if (options.token) req.header.set("Authorization", `Bearer ${options.token}`);
    const named = generations.header();
    if (named) req.header.set("Seqd-Generation", named);
    let res;
    try {
      res = await next(req);
    } catch (err) {
      const why = generations.see(ConnectError.from(err).metadata.get("Seqd-Generation"), false);
      if (why) throw new ConnectError(`answer refused: ${why}`, Code.Unavailable);
      const hint = leaderHint(err);
      if (hint) {
        info.leaderId = hint.id;
        info.leaderAddr = hint.addr;
        if (ConnectError.from(err).code === Code.Unavailable) refresh();
      }
      throw err;
    }
    const served = req.service.typeName === SequenceService.typeName || req.service.typeName === IdService.typeName;
    const why = generations.see(res.header.get("Seqd-Generation"), served);
    if (why) throw new ConnectError(`answer refused: ${why}`, Code.Unavailable);
    const v = res.header.get("Seqd-Routing-Version");
    if (v && /^\d+$/.test(v)) {
      info.routingVersion = BigInt(v);
      if (info.routingVersion !== tableVersion) refresh();
    }
    if (req.service.typeName === SequenceService.typeName) {
      const hint = res.header.get("Seqd-Leader") ?? "";
      if (hint) forwarded++;
      if (table) learnGroup(table, url, res.header.get("Seqd-Group") ?? "", hint ? urlOf(hint) : undefined);
    }
    return res;
  };

  const conns = new Map<string, Conn>();
  function conn(url: string): Conn {
    let c = conns.get(url);
    if (!c) {
      const common = {
        baseUrl: url,
        interceptors: [observe(url)],
        defaultTimeoutMs: timeoutMs,
        ...(options.fetch ? { fetch: options.fetch } : {}),
      };
      const transport: Transport =
        kind === "grpc-web"
          ? createGrpcWebTransport(common)
          : createConnectTransport({ ...common, useBinaryFormat: options.binary ?? false });
      c = {
        seq: createClient(SequenceService, transport),
        admin: createClient(AdminService, transport),
        ids: createClient(IdService, transport),
      };
      conns.set(url, c);
    }
    return c;
  }

  // refresh reads ClusterStatus in the background (one at a time) from the
  // given nodes, the one in use first, and installs the first answer that
  // names a leader: its routing version, unless older than the table's (a
  // leader change the client has seen), and its group rows either way.
  function refresh(): void {
    if (!routed || refreshing) return;
    refreshing = true;
    void (async () => {
      try {
        for (let i = 0; i < given.length; i++) {
          let st: ClusterStatusResponse;
          try {
            st = await conn(given[(cur + i) % given.length]).admin.clusterStatus({});
          } catch {
            continue;
          }
          if (st.leaderApiAddr === "" || st.version === 0n) continue;
          const older = st.version >> 32n < tableVersion >> 32n;
          if (!older || st.groups.length > 1) table = applyGroups(table, st, urlOf);
          if (!older) {
            tableVersion = st.version;
            refreshes++;
          }
          return;
        }
      } finally {
        refreshing = false;
      }
    })();
  }

  // attempts runs call against the leader of group (when the table knows it;
  // -1: no group) or else the given node in use, retrying (see above) until
  // it succeeds, fails for good, retryForMs passes, or signal aborts.
  async function attempts<T>(group: number, signal: AbortSignal | undefined, call: (c: Conn) => Promise<T>): Promise<T> {
    const deadline = Date.now() + retryForMs;
    let backoff = 50;
    for (let attempt = 0; ; attempt++) {
      const leader = group >= 0 ? table?.leaders[group]?.url : undefined;
      const at = cur;
      try {
        return await call(conn(leader ?? given[at]));
      } catch (err) {
        const ce = ConnectError.from(err);
        const unreachable = isNetworkError(ce) || ce.code === Code.DeadlineExceeded;
        if (signal?.aborted || !(ce.code === Code.Unavailable || (unreachable && (leader !== undefined || given.length > 1)))) {
          throw ce;
        }
        let now = false; // a node worth trying at once
        if (leader !== undefined) {
          // The group's presumed leader failed: forget it (keeping its term),
          // refresh, and go through the given node in use, which forwards.
          const l = table?.leaders[group];
          if (l?.url === leader) l.url = undefined;
          refresh();
          now = true;
        } else {
          const hint = leaderHint(ce)?.addr;
          const i = hint ? given.indexOf(urlOf(hint)) : -1;
          if (i >= 0 && i !== at) {
            cur = i;
            now = true;
          } else if (cur === at) {
            cur = (at + 1) % given.length;
          }
        }
        const wait = now && attempt === 0 ? 0 : backoff * (0.5 + Math.random() / 2);
        if (retryForMs <= 0 || Date.now() + wait > deadline) throw ce;
        if (wait > 0) {
          await new Promise((r) => setTimeout(r, wait));
          backoff = Math.min(backoff * 2, 1000);
        }
      }
    }
  }

  // multi sends one next or current request for keys, with retries, to
  // group's leader (-1: the given node in use).
  const multi = (kind: Kind, space: string, keys: bigint[], group: number, signal?: AbortSignal) =>
    attempts(group, signal, async (c) => {
      const req = { space, keys };
      const vals = (kind === "next" ? await c.seq.next(req, { signal }) : await c.seq.current(req, { signal })).values;
      if (vals.length !== keys.length) {
        throw new ConnectError(`server returned ${vals.length} values for ${keys.length} keys`, Code.Internal);
      }
      return vals;
    });

  // send sends the keys of one call, or of one group's share of it, through
  // the batcher of (kind, space, group), or on their own.
  function send(kind: Kind, space: string, keys: bigint[], group: number, signal?: AbortSignal): Promise<bigint[]> {
    if (options.disableCoalescing || keys.length === 0 || keys.length > limits.maxBatchKeys) {
      return multi(kind, space, keys, group, signal);
    }
    const id = `${kind} ${group} ${space}`;
    let b = batchers.get(id);
    if (!b) {
      b = new Batcher(limits, stats, (keys, signal) => multi(kind, space, keys, group, signal));
      batchers.set(id, b);
    }
    return b.do(keys, signal);
  }

  // perKey runs next or current: split by group when the table knows the
  // space, else whole (see above).
  async function perKey(kind: Kind, space: string, keys: Key[]): Promise<bigint[]> {
    const ks = keys.map(toKey);
    const t = table;
    const size = t?.spaces.get(spaceName(space));
    if (!t || size === undefined || ks.length === 0 || ks.length > MAX_KEYS) {
      const vals = await send(kind, space, ks, -1);
      if (t && size === undefined) refresh(); // the space exists: learn its section size
      return vals;
    }
    const shares = splitShares(spaceName(space), size, t.n, ks);
    if (shares.length === 1) return send(kind, space, ks, shares[0].group);
    const vals = new Array<bigint>(ks.length);
    const stop = new AbortController();
    let failure: { err: unknown } | undefined;
    await Promise.all(
      shares.map((sh) =>
        send(kind, space, sh.keys, sh.group, stop.signal).then(
          (v) => sh.pos.forEach((p, i) => (vals[p] = v[i])),
          (err) => {
            if (!failure) failure = { err };
            stop.abort(); // the call fails as a whole: stop the other shares
          },
        ),
      ),
    );
    if (failure) throw failure.err;
    return vals;
  }

  const plain = <T>(call: (c: Conn) => Promise<T>) => attempts(-1, undefined, call);

  return {
    baseUrl: given[0],
    transport: kind,
    next(space, keys) {
      return perKey("next", space, keys);
    },
    async reserve(space, key, count) {
      const k = toKey(key);
      const t = table;
      const size = t?.spaces.get(spaceName(space));
      const group = t && size !== undefined ? groupOfKey(spaceName(space), size, k, t.n) : -1;
      const res = await attempts(group, undefined, (c) => c.seq.reserve({ space, key: k, count }));
      if (t && size === undefined) refresh(); // the space exists: learn its section size
      return { first: res.first, count: res.count };
    },
    segment(space, key, opts) {
      const k = toKey(key);
      // One reservation, retried (as reserve is) until timeoutMs passes.
      return createSegment(async (count, timeoutMs) => {
        const stop = new AbortController();
        const timer = setTimeout(() => stop.abort(), timeoutMs);
        try {
          const t = table;
          const size = t?.spaces.get(spaceName(space));
          const group = t && size !== undefined ? groupOfKey(spaceName(space), size, k, t.n) : -1;
          const res = await attempts(group, stop.signal, (c) => c.seq.reserve({ space, key: k, count }, { signal: stop.signal }));
          return res.first;
        } finally {
          clearTimeout(timer);
        }
      }, opts);
    },
    current(space, keys) {
      return perKey("current", space, keys);
    },
    async nextIds(namespace, count) {
      return (await plain((c) => c.ids.nextIds({ namespace, count }))).ids;
    },
    decode(namespace, id) {
      return plain((c) => c.ids.decode({ namespace, id }));
    },
    getLayout(namespace) {
      return plain((c) => c.ids.getLayout({ namespace }));
    },
    async listNamespaces() {
      return (await plain((c) => c.admin.listNamespaces({}))).namespaces;
    },
    async listWorkers(namespace) {
      return (await plain((c) => c.admin.listWorkers({ namespace }))).workers;
    },
    clusterStatus() {
      return plain((c) => c.admin.clusterStatus({}));
    },
    async listSpaces() {
      return (await plain((c) => c.admin.listSpaces({}))).spaces;
    },
    async createSpace(name, step = 0n, sectionSize = 0n) {
      const res = await plain((c) => c.admin.createSpace({ name, step: BigInt(step), sectionSize: BigInt(sectionSize) }));
      return { space: res.space, created: res.created };
    },
    routing() {
      return {
        ...info,
        tableVersion,
        refreshes,
        forwarded,
        groups: (table?.leaders ?? []).map((l) => ({ leader: l.url ?? "", term: l.term })),
        node: given[cur],
        generation: generations.header(),
      };
    },
    batchStats() {
      return { ...stats };
    },
  };
}

type Kind = "next" | "current";

/** n when a positive number, else undefined (the default). */
function positive(n: number | undefined): number | undefined {
  return n !== undefined && n > 0 ? Math.floor(n) : undefined;
}

function trimUrl(u: string): string {
  return u.trim().replace(/\/+$/, "");
}

// isNetworkError reports whether err did not come from a server: fetch
// rejects with a TypeError when it cannot connect (or CORS refuses).
function isNetworkError(err: ConnectError): boolean {
  return err.cause instanceof TypeError;
}

function toKey(k: Key): bigint {
  const v = typeof k === "bigint" ? k : BigInt(typeof k === "string" ? k.trim() : k);
  if (v < 0n || v > 0xffffffffffffffffn) throw new RangeError(`key ${k} is not a uint64`);
  return v;
}
