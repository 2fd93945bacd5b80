// Package @seqd/web: a small browser client for seqd over Connect or gRPC-Web.
//
//   import { createSeqdClient } from "@seqd/web";
//   const seqd = createSeqdClient("https://seqd.example:7700", { transport: "grpc-web" });
//   const [a, b] = await seqd.next("default", [42n, 7n]);   // bigint values
//
// Every uint64 is a bigint. Keys may be given as bigint, number or decimal string.
// The node at baseUrl forwards to the leader, so one address is enough; calls
// that fail with `unavailable` (no leader yet, a failover in progress) are
// retried with backoff for up to retryForMs: a retried Next or Reserve can
// leave a gap in a key's sequence, never a repeat.

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

export { Code, ConnectError };
export type { ClusterStatusResponse, GroupRoute, Node, Space, DecodeResponse, GetLayoutResponse, Namespace, Worker, WorkerUse };

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
}

export type Key = bigint | number | string;

/** What a call learnt about the cluster from response headers and error metadata. */
export interface RoutingInfo {
  /** Seqd-Routing-Version of the last successful sequence call (0n before any). */
  routingVersion: bigint;
  /** Leader hint (Seqd-Leader-Id, Seqd-Leader) of the last `unavailable` error, if any. */
  leaderId: string;
  leaderAddr: string;
}

export interface SeqdClient {
  readonly baseUrl: string;
  readonly transport: TransportKind;
  /** One new value per key; a key listed twice gets two increasing values. */
  next(space: string, keys: Key[]): Promise<bigint[]>;
  /** count consecutive values for key: first .. first+count-1. */
  reserve(space: string, key: Key, count: number): Promise<{ first: bigint; count: number }>;
  /** The current value per key (0n: none issued yet); no side effects. */
  current(space: string, keys: Key[]): Promise<bigint[]>;
  /** Leader, term, routing version and every node, as seen by the node at baseUrl. */
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
  clusterStatus(): Promise<ClusterStatusResponse>;
  listSpaces(): Promise<Space[]>;
  createSpace(name: string, step?: bigint | number, sectionSize?: bigint | number): Promise<{ space?: Space; created: boolean }>;
  /** Routing information from the latest calls. */
  routing(): RoutingInfo;
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

export function createSeqdClient(baseUrl: string, options: SeqdClientOptions = {}): SeqdClient {
  const kind: TransportKind = options.transport ?? "connect";
  const timeoutMs = options.timeoutMs ?? 5000;
  const retryForMs = options.retryForMs ?? 10000;
  const info: RoutingInfo = { routingVersion: 0n, leaderId: "", leaderAddr: "" };

  const observe: Interceptor = (next) => async (req) => {
    if (options.token) req.header.set("Authorization", `Bearer ${options.token}`);
    try {
      const res = await next(req);
      const v = res.header.get("Seqd-Routing-Version");
      if (v && /^\d+$/.test(v)) info.routingVersion = BigInt(v);
      return res;
    } catch (err) {
      const hint = leaderHint(err);
      if (hint) {
        info.leaderId = hint.id;
        info.leaderAddr = hint.addr;
      }
      throw err;
    }
  };

  const base = baseUrl.replace(/\/+$/, "");
  const common = {
    baseUrl: base,
    interceptors: [observe],
    defaultTimeoutMs: timeoutMs,
    ...(options.fetch ? { fetch: options.fetch } : {}),
  };
  const transport: Transport =
    kind === "grpc-web"
      ? createGrpcWebTransport(common)
      : createConnectTransport({ ...common, useBinaryFormat: options.binary ?? false });

  const seq: Client<typeof SequenceService> = createClient(SequenceService, transport);
  const admin: Client<typeof AdminService> = createClient(AdminService, transport);
  const ids: Client<typeof IdService> = createClient(IdService, transport);

  async function retrying<T>(call: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + retryForMs;
    let backoff = 50;
    for (;;) {
      try {
        return await call();
      } catch (err) {
        const ce = ConnectError.from(err);
        if (ce.code !== Code.Unavailable || Date.now() + backoff > deadline) throw ce;
        await new Promise((r) => setTimeout(r, backoff * (0.5 + Math.random() / 2)));
        backoff = Math.min(backoff * 2, 1000);
      }
    }
  }

  return {
    baseUrl: base,
    transport: kind,
    async next(space, keys) {
      const res = await retrying(() => seq.next({ space, keys: keys.map(toKey) }));
      return res.values;
    },
    async reserve(space, key, count) {
      const res = await retrying(() => seq.reserve({ space, key: toKey(key), count }));
      return { first: res.first, count: res.count };
    },
    async current(space, keys) {
      const res = await retrying(() => seq.current({ space, keys: keys.map(toKey) }));
      return res.values;
    },
    async nextIds(namespace, count) {
      return (await retrying(() => ids.nextIds({ namespace, count }))).ids;
    },
    decode(namespace, id) {
      return retrying(() => ids.decode({ namespace, id }));
    },
    getLayout(namespace) {
      return retrying(() => ids.getLayout({ namespace }));
    },
    async listNamespaces() {
      return (await retrying(() => admin.listNamespaces({}))).namespaces;
    },
    async listWorkers(namespace) {
      return (await retrying(() => admin.listWorkers({ namespace }))).workers;
    },
    clusterStatus() {
      return retrying(() => admin.clusterStatus({}));
    },
    async listSpaces() {
      return (await retrying(() => admin.listSpaces({}))).spaces;
    },
    async createSpace(name, step = 0n, sectionSize = 0n) {
      const res = await retrying(() =>
        admin.createSpace({ name, step: BigInt(step), sectionSize: BigInt(sectionSize) }),
      );
      return { space: res.space, created: res.created };
    },
    routing() {
      return { ...info };
    },
  };
}

function toKey(k: Key): bigint {
  const v = typeof k === "bigint" ? k : BigInt(typeof k === "string" ? k.trim() : k);
  if (v < 0n || v > 0xffffffffffffffffn) throw new RangeError(`key ${k} is not a uint64`);
  return v;
}
