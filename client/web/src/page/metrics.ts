// Values issued per second, from seqd's Prometheus text (/metrics).
//
// seqd_values_issued_total{call=...} counts the values a node issued while it
// was the leader, so the cluster's rate is the sum of every node's rate. The
// page scrapes the node it talks to through its API base URL, and the other
// nodes at http(s)://<api_addr>/metrics, which a browser only allows when
// those nodes send CORS headers for the page's origin (seqd --cors-origin).
// Such a node that cannot be scraped is retried every 15 seconds; the node
// behind the API base URL is scraped on every poll.

export interface Sample {
  issued: number; // sum over call kinds
  leaseRemaining: number | undefined; // seqd_lease_remaining_seconds
  at: number; // performance.now() ms
}

export function parseMetrics(text: string): Omit<Sample, "at"> {
  let issued = 0;
  let leaseRemaining: number | undefined;
  for (const line of text.split("\n")) {
    if (line.startsWith("seqd_values_issued_total")) {
      const v = Number(line.slice(line.lastIndexOf(" ") + 1));
      if (Number.isFinite(v)) issued += v;
    } else if (line.startsWith("seqd_lease_remaining_seconds ")) {
      const v = Number(line.slice(line.lastIndexOf(" ") + 1));
      if (Number.isFinite(v)) leaseRemaining = v;
    }
  }
  return { issued, leaseRemaining };
}

// The rate is taken over the samples of the last WINDOW_MS, so that one quiet
// second does not read as zero.
const WINDOW_MS = 5000;

interface NodeState {
  samples: Sample[]; // oldest first, within WINDOW_MS of the newest
  failedUntil?: number;
}

export interface RateReading {
  perSecond: number | undefined;
  scraped: number; // nodes with a fresh rate
  rated: Set<string>; // their ids
  of: number;
  lease: Map<string, number | undefined>; // node id -> lease remaining, for scraped nodes
}

export class IssuedRate {
  private nodes = new Map<string, NodeState>();

  /** targets: node id -> URL of its /metrics; primary: the URL never to back off from. */
  async scrape(targets: Map<string, string>, primary: string, timeoutMs = 1500): Promise<RateReading> {
    const now = performance.now();
    const key = (id: string, url: string) => `${id} ${url}`;
    const live = new Set([...targets].map(([id, url]) => key(id, url)));
    for (const k of this.nodes.keys()) if (!live.has(k)) this.nodes.delete(k);
    await Promise.all(
      [...targets].map(async ([id, url]) => {
        const st = this.nodes.get(key(id, url)) ?? { samples: [] };
        this.nodes.set(key(id, url), st);
        if (st.failedUntil && now < st.failedUntil && url !== primary) return;
        try {
          const ctl = new AbortController();
          const timer = setTimeout(() => ctl.abort(), timeoutMs);
          const res = await fetch(url, { signal: ctl.signal, cache: "no-store" });
          const text = await res.text();
          clearTimeout(timer);
          if (!res.ok) throw new Error(`HTTP ${res.status}`);
          const s: Sample = { ...parseMetrics(text), at: performance.now() };
          const prev = st.samples[st.samples.length - 1];
          // A counter that went down belongs to a restarted process: start over.
          if (prev && s.issued < prev.issued) st.samples = [];
          st.samples.push(s);
          while (st.samples.length > 2 && s.at - st.samples[0].at > WINDOW_MS) st.samples.shift();
          st.failedUntil = undefined;
        } catch {
          st.failedUntil = performance.now() + 15000;
          st.samples = [];
        }
      }),
    );
    let sum: number | undefined;
    let scraped = 0;
    const rated = new Set<string>();
    const lease = new Map<string, number | undefined>();
    for (const [id, url] of targets) {
      const st = this.nodes.get(key(id, url));
      if (!st || st.samples.length === 0) continue;
      const first = st.samples[0];
      const last = st.samples[st.samples.length - 1];
      lease.set(id, last.leaseRemaining);
      if (st.samples.length >= 2 && performance.now() - last.at < 3000) {
        sum = (sum ?? 0) + ((last.issued - first.issued) * 1000) / (last.at - first.at);
        scraped++;
        rated.add(id);
      }
    }
    return { perSecond: sum, scraped, rated, of: targets.size, lease };
  }
}
