#!/usr/bin/env python3
"""Prints the headline of a scripts/compare.sh run (its OUT directory) as
markdown: per round and as the median of the rounds, seqd on its defaults
against Redis INCR through rueidis and go-redis, against seqd with
--groups 1, the tail at 25/50/75 % of seqd's peak against rueidis at the
same rates, and CPU per id, with each round's steal (runs/cpu.tsv).

Only rows the run measured are printed. Usage: headline.py OUT
"""
import glob
import json
import os
import re
import statistics
import sys


def load(out):
    runs = {}  # name -> {round: median result}
    for f in glob.glob(os.path.join(out, "runs", "*.r*.json")):
        m = re.match(r"(.*)\.r(\d+)\.json$", os.path.basename(f))
        if not m:
            continue
        try:
            med = json.load(open(f)).get("median")
        except (OSError, ValueError):
            continue
        if med:
            runs.setdefault(m.group(1), {})[int(m.group(2))] = med
    steal = {}  # (name, round) -> steal %
    try:
        for line in open(os.path.join(out, "runs", "cpu.tsv")):
            f = line.rstrip("\n").split("\t")
            if len(f) >= 7 and f[6].startswith("steal "):
                steal[(f[0], int(f[1]))] = int(f[6].split()[1].rstrip("%"))
    except OSError:
        pass
    return runs, steal


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec="{:,.0f}"):
    return "" if x is None else spec.format(x)


def cpu(r):
    c = r.get("cpu") if r else None
    if not c:
        return None, None
    return c.get("client_us_per_id"), c.get("server_us_per_id")


def main(out):
    runs, steal = load(out)
    rounds = sorted({r for v in runs.values() for r in v})
    if not rounds:
        print("no runs in", out)
        return
    print(f"# Headline of {out}\n")
    print(f"Rounds: {len(rounds)} (each row once per round, interleaved); medians of the rounds.\n")

    def row_ratio(a, b, key=lambda r: r["ids_per_s"]):
        per = []
        for r in rounds:
            x, y = runs.get(a, {}).get(r), runs.get(b, {}).get(r)
            per.append(key(x) / key(y) if x and y and key(y) else None)
        return per

    # Throughput by concurrency.
    concs = sorted({int(m.group(1)) for n in runs for m in [re.match(r"seqd-next-coalesced-c(\d+)$", n)] if m})
    if concs:
        print("## Throughput (ids/s; Next of one key per call through the Go client on its defaults)\n")
        print("| callers | seqd, defaults (3 groups) | seqd --groups 1 | rueidis | go-redis | seqd ÷ rueidis (per round) | seqd ÷ --groups 1 (per round) | seqd ÷ go-redis | steal % (seqd runs) |")
        print("| ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | --- |")
        for c in concs:
            s, g, ru, gr = (f"seqd-next-coalesced-c{c}", f"seqd-g1-next-coalesced-c{c}",
                            f"redis-incr-rueidis-c{c}", f"redis-incr-c{c}")
            ids = lambda n: med([runs.get(n, {}).get(r, {}).get("ids_per_s") for r in rounds])
            rr, rg, rgr = row_ratio(s, ru), row_ratio(s, g), row_ratio(s, gr)
            per = lambda xs: " / ".join(fmt(x, "{:.2f}") for x in xs) + (f" (**{med(xs):.2f}**)" if med(xs) else "")
            st = " / ".join(str(steal.get((s, r), "")) for r in rounds)
            print(f"| {c} | {fmt(ids(s))} | {fmt(ids(g))} | {fmt(ids(ru))} | {fmt(ids(gr))} | {per(rr)} | {per(rg)} | {fmt(med(rgr), '{:.2f}')} | {st} |")
        print()

    # Tail.
    parts = [p for p in ("quarter", "half", "3q") if f"seqd-next-coalesced-c64-{p}-peak" in runs]
    if parts:
        print("## Tail (64 callers, open loop at a share of the round's seqd peak, latency from each call's scheduled start)\n")
        print("| share of peak | rate (calls/s, median) | seqd p99 ms | seqd p99.9 ms | rueidis p99 ms | rueidis p99.9 ms | seqd p99 ÷ rueidis p99 (per round) |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
        for p in parts:
            s, ru = f"seqd-next-coalesced-c64-{p}-peak", f"redis-incr-rueidis-c64-seqd-{p}-peak"
            lat = lambda n, q: med([runs.get(n, {}).get(r, {}).get("latency", {}).get(q) for r in rounds])
            rate = med([runs.get(s, {}).get(r, {}).get("target_rate") for r in rounds])
            rr = row_ratio(s, ru, key=lambda x: x["latency"]["p99_ms"])
            share = {"quarter": "25 %", "half": "50 %", "3q": "75 %"}[p]
            per = " / ".join(fmt(x, "{:.2f}") for x in rr) + (f" (**{med(rr):.2f}**)" if med(rr) else "")
            print(f"| {share} | {fmt(rate)} | {fmt(lat(s, 'p99_ms'), '{:.3f}')} | {fmt(lat(s, 'p99_9_ms'), '{:.3f}')} | "
                  f"{fmt(lat(ru, 'p99_ms'), '{:.3f}')} | {fmt(lat(ru, 'p99_9_ms'), '{:.3f}')} | {per} |")
        print()

    # CPU per id.
    names = [(n, label) for n, label in (
        ("seqd-next-coalesced-c64", "seqd, defaults (3 groups), 64 callers"),
        ("seqd-g1-next-coalesced-c64", "seqd --groups 1, 64 callers"),
        ("redis-incr-rueidis-c64", "Redis + rueidis, 64 callers"),
        ("redis-incr-c64", "Redis + go-redis, 64 callers"),
        ("seqd-next-coalesced-unary-c64", "seqd, defaults, 64 callers, coalesced unary requests (before NextStream)"),
        ("seqd-next-coalesced-connect-stream-c64", "seqd, defaults, 64 callers, NextStream over Connect (HTTP/2)"),
        ("seqd-next-coalesced-c64-half-peak", "seqd at half of its peak"),
        ("redis-incr-rueidis-c64-seqd-half-peak", "Redis + rueidis at the same rate"),
    ) if n in runs]
    tr = [(n, l) for n, l in (("seqd-next-coalesced-c64", "framed NextStream (the default)"),
                               ("seqd-next-coalesced-connect-stream-c64", "NextStream over Connect (HTTP/2)"),
                               ("seqd-next-coalesced-unary-c64", "coalesced unary requests (before NextStream)")) if n in runs]
    if len(tr) > 1:
        print("## The client's transports (seqd on its defaults, 64 callers, same rounds)\n")
        print("| transport | ids/s (per round) | ÷ unary (per round) |")
        print("| --- | --- | --- |")
        for n, label in tr:
            ids = [runs[n].get(r, {}).get("ids_per_s") for r in rounds]
            rat = row_ratio(n, "seqd-next-coalesced-unary-c64")
            print(f"| {label} | {' / '.join(fmt(x) for x in ids)} (**{fmt(med(ids))}**) | "
                  f"{' / '.join(fmt(x, '{:.2f}') for x in rat)} (**{fmt(med(rat), '{:.2f}')}**) |")
        print()
    if names:
        print("## CPU per id (µs of CPU time per id, from /proc over the measured run; medians of the rounds)\n")
        print("| row | client (load tool and client) | server(s) | total |")
        print("| --- | ---: | ---: | ---: |")
        for n, label in names:
            cs = [cpu(runs[n].get(r)) for r in rounds]
            c, s = med([x[0] for x in cs]), med([x[1] for x in cs])
            tot = med([x[0] + x[1] if x[0] is not None and x[1] is not None else None for x in cs])
            print(f"| {label} | {fmt(c, '{:.2f}')} | {fmt(s, '{:.2f}')} | {fmt(tot, '{:.2f}')} |")
        print()
    st = [v for v in steal.values()]
    if st:
        print(f"Steal over every run of the set: median {statistics.median(st)} %, range {min(st)}-{max(st)} %.")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
