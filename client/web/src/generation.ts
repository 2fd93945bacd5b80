// Generations (see seqd.Generation in the Go tree, generation.go): a
// cluster's lineage, fixed when it first bootstrapped, the number of
// restores along the way, and the cluster ID of the restore. Every answer
// carries its server's in the Seqd-Generation header ("lineage/number/
// cluster"); the client names the newest it met on every call, so that a
// server of an older generation of the lineage learns that a restore
// replaced its cluster and stops, and it refuses an answer from an older
// generation, from a sibling restore of the one it met first, or from
// another lineage: such an answer never reaches the caller, and the call is
// tried again like an unavailable one.

export interface Generation {
  lineage: string;
  number: bigint;
  cluster: string;
}

const ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Parses a Seqd-Generation value; undefined for one that is malformed. */
export function parseGeneration(v: string): Generation | undefined {
  const parts = v.split("/");
  if (parts.length !== 3 || !ID.test(parts[0]) || !ID.test(parts[2]) || !/^\d{1,20}$/.test(parts[1])) return undefined;
  const number = BigInt(parts[1]);
  if (number >= 1n << 64n) return undefined;
  return { lineage: parts[0], number, cluster: parts[2] };
}

export function formatGeneration(g: Generation): string {
  return `${g.lineage}/${g.number}/${g.cluster}`;
}

/** The newest generation a client met, and its checks of answers. */
export class Generations {
  known: Generation | undefined;

  /** The value to name on a request ("" before any answer). */
  header(): string {
    return this.known ? formatGeneration(this.known) : "";
  }

  /**
   * Checks an answer's Seqd-Generation value (null or "": a server of a
   * build before generations); returns why it is refused, or undefined.
   * served tells whether the answer handed out values: only then is a newer
   * generation remembered (and named to servers, which fence themselves on
   * it), so a generation met only in an error or a status answer, such as a
   * restore made by mistake that never served, fences nothing.
   */
  see(v: string | null, served: boolean): string | undefined {
    if (!v) return undefined;
    const g = parseGeneration(v);
    if (!g) return `malformed Seqd-Generation ${JSON.stringify(v)}`;
    const k = this.known;
    if (!k || (g.lineage === k.lineage && g.number > k.number)) {
      if (served) this.known = g;
      return undefined;
    }
    if (g.lineage !== k.lineage) return `the server belongs to another cluster (lineage ${g.lineage}; this client's cluster is ${k.lineage})`;
    if (g.number < k.number)
      return `the server's cluster was replaced by a restore (generation ${g.number}; this client met generation ${k.number})`;
    if (g.cluster !== k.cluster)
      return `the server's cluster is another restore of the same backup (cluster ${g.cluster}; this client met cluster ${k.cluster} first)`;
    return undefined;
  }
}
