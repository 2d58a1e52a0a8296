"""URL filtering benchmark (`python -m bench.dpi`): the report of a run (tables, targets) and its plot."""
import os
import platform
from bench.dpi_common import LABEL
from bench.dpi_traffic import http_request


def cell(res, system, n):
    return next((c for c in res["cells"] if c["system"] == system and c["domains"] == n), None)


def targets(res, args):
    out = []
    top = max(args.domains)
    nf, fa = cell(res, "netfilter", top), cell(res, "fast", top)
    if nf and fa:
        ratio = fa["throughput"]["pps"] / nf["throughput"]["pps"] if nf["throughput"]["pps"] else float("inf")
        out.append({"target": f"fast >= 10x netfilter throughput at {top} domains", "value": ratio, "threshold": 10.0,
                    "verdict": "PASS" if ratio >= 10 else "MISS", "note": "" if top == 5000 else "(target is stated at 5000)"})
    for s in ("fast", "recirc"):
        meds = [c["latency_us"]["median"] for c in res["cells"] if c["system"] == s and c["domains"] > 0]
        if len(meds) >= 2:
            ratio = max(meds) / min(meds)
            out.append({"target": f"{s} latency flat in the number of domains (max/min median over {len(meds)} lists <= 1.5)",
                        "value": ratio, "threshold": 1.5, "verdict": "PASS" if ratio <= 1.5 else "MISS",
                        "note": "" if s == "fast" else "(informative: the issue's target names p4sec)"})
    return out


def report(res, args):
    systems = args.systems
    counts = sorted(set([0] + args.domains))
    print(f"\nURL filtering: HTTP GET frames ({len(http_request(res['good_host']))}-byte requests) through namespace M, "
          f"{args.seconds:g} s per throughput cell, {args.samples} latency samples per cell; medians over {args.rounds} round(s) "
          f"interleaved over the list sizes")
    print("throughput (kpps arriving at B; median over rounds, [best round]):")
    print(f"  {'domains':>8} " + " ".join(f"{s:>18}" for s in systems) + ("  fast/netfilter" if {"fast", "netfilter"} <= set(systems) else ""))

    def tput(t):
        return f"{t['pps'] / 1e3:.1f} [{t['best_pps'] / 1e3:.1f}]".rjust(18) if args.rounds > 1 else f"{t['pps'] / 1e3:>18.1f}"

    for n in counts:
        row = []
        for s in systems:
            c = cell(res, s, n)
            row.append(tput(c["throughput"]) if c else f"{'-':>18}")
        extra = ""
        a, b = cell(res, "fast", n), cell(res, "netfilter", n)
        if a and b and b["throughput"]["pps"]:
            extra = f"  {a['throughput']['pps'] / b['throughput']['pps']:>13.1f}x"
        print(f"  {n:>8} " + " ".join(row) + extra)
    print("latency per packet A -> B (us, median / p99; added = minus the same system with 0 domains):")
    print(f"  {'domains':>8} " + " ".join(f"{s:>24}" for s in systems))
    for n in counts:
        row = []
        for s in systems:
            c = cell(res, s, n)
            if not c:
                row.append(f"{'-':>24}")
                continue
            l = c["latency_us"]
            row.append(f"{l['median']:>9.1f} / {l['p99']:>8.1f}  " + (f"({c['added_latency_us']['median']:+.0f})".rjust(9) if n else " " * 9)[-9:])
        print(f"  {n:>8} " + " ".join(f"{x:>24}" for x in row))
    if res["flows"]:
        fl = sorted({f["flows"] for f in res["flows"]})
        print("throughput over parallel flows (kpps; domains: " +
              ", ".join(f"{s} {next(f['domains'] for f in res['flows'] if f['system'] == s)}" for s in systems
                        if any(f["system"] == s for f in res["flows"])) + "):")
        print(f"  {'flows':>8} " + " ".join(f"{s:>18}" for s in systems))
        for n in fl:
            row = []
            for s in systems:
                f = next((f for f in res["flows"] if f["system"] == s and f["flows"] == n), None)
                row.append(tput(f["throughput"]) if f else f"{'-':>18}")
            print(f"  {n:>8} " + " ".join(row))
    for s in res["skipped"]:
        print(f"  skipped: {s['system']} with {s['domains']} domains: {s['reason']}")
    print("listed-domain checks (a request for a listed name dropped, an unlisted one forwarded): "
          f"{sum(1 for c in res['cells'] if 'block_check' in c)} configuration(s), all passed")
    print("targets:" if res["targets"] else "targets: none applicable (they need netfilter and fast, or two list sizes)")
    for tg in res["targets"]:
        print(f"  {tg['verdict']}: {tg['target']}: {tg['value']:.2f} {tg['note']}".rstrip())


def plot(res, args, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    colors = {"netfilter": "tab:red", "fast": "tab:blue", "recirc": "tab:green"}
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.4))
    for s in args.systems:
        cs = [c for c in res["cells"] if c["system"] == s and c["domains"] > 0]
        if cs:
            x = [c["domains"] for c in cs]
            ax[0].plot(x, [c["throughput"]["pps"] / 1e3 for c in cs], "o-", color=colors[s], label=LABEL[s])
            ax[1].plot(x, [c["latency_us"]["median"] for c in cs], "o-", color=colors[s], label=f"{LABEL[s]}, median")
            ax[1].plot(x, [c["latency_us"]["p99"] for c in cs], "x--", color=colors[s], alpha=0.6, label=f"{s}, p99")
        fs = [f for f in res["flows"] if f["system"] == s]
        if fs:
            ax[2].plot([f["flows"] for f in fs], [f["throughput"]["pps"] / 1e3 for f in fs], "o-", color=colors[s],
                       label=f"{LABEL[s]} ({fs[0]['domains']} domains)")
    ax[0].set(xscale="log", yscale="log", xlabel="listed domains", ylabel="throughput (kpps)", title="throughput vs list size")
    ax[1].set(xscale="log", yscale="log", xlabel="listed domains", ylabel="latency A -> B (us)", title="latency per packet vs list size")
    ax[2].set(xscale="log", yscale="log", xlabel="parallel flows", ylabel="throughput (kpps)", title="throughput vs parallel flows")
    for a in ax:
        a.grid(True, which="both", alpha=0.3)
        a.legend(fontsize=7)
    fig.suptitle(f"URL filtering, HTTP GET frames, veth namespaces, {os.cpu_count()} cores ({platform.node() or 'host'})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
