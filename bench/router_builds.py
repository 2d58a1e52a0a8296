"""The router benchmark of two or more p4sec builds, taking turns: route installs and forwarding, in one run.

    python -m bench.router_builds --compare LABEL=PATH [--compare ...] [--p4sec PATH] [--rounds N]
                                  [--routes N] [--vrfs N | --ipv6] [--seconds S] [--json FILE]

Each round runs `p4sec bench --json` (the IPv4 router; with `--vrfs N` the VRF router, with `--ipv6` the IPv6
router) of every build in turn,
so that a change in the machine's load falls on all of them alike; the builds are this checkout's `p4sec`
(labelled `p4sec`, or `--p4sec PATH`) and each `--compare LABEL=PATH` (for instance the build before a change).
It prints, per build, the medians over the rounds of what `p4sec bench` measures itself: the route install rate
on the closure and on the native engine (routes into a fresh engine in batches of 1,000), the native engine's
and the hand-written router's packets per second and their ratio; then each compared build's install rates and
native forwarding rate as a ratio of the first build's. This is how "write rates must not drop" is checked
against an older build. A figure an older build does not print (one from before the native engine prints no
native figures, and its install rate is of one install, not a median of five) is shown as `-`. `--json FILE`
writes the rows.
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

from bench.builds import compared
from bench.veth import median

# What each row keeps of `p4sec bench --json`, and how the table names it.
FIELDS = [
    ("route_insert_per_s", "installs/s, closure"),
    ("route_insert_per_s_native", "installs/s, native"),
    ("jit_pps", "native pkt/s"),
    ("native_pps", "hand-written pkt/s"),
    ("jit_over_native", "native / hand-written"),
]


def builds(args, parser):
    """(label, binary) of each build, this checkout's first."""
    return [("p4sec", args.p4sec), *compared(args.compare, ["p4sec"], parser)]


def one(binary, args, out):
    """One `p4sec bench --json` run of `binary`: its JSON figures."""
    cmd = [binary, "bench", "--routes", str(args.routes), "--seconds", str(args.seconds), "--json", str(out)]
    if args.vrfs:
        cmd += ["--vrfs", str(args.vrfs)]
    if args.ipv6:
        cmd += ["--ipv6"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip() or r.stdout.strip()}")
    j = json.loads(pathlib.Path(out).read_text())
    if j.get("agree") != j.get("packets_checked"):
        raise RuntimeError(f"{binary}: the engines forwarded {j.get('agree')} of {j.get('packets_checked')} packets "
                           "as the hand-written router does")
    return j


def run(args, parser):
    bs = builds(args, parser)
    runs = {label: [] for label, _ in bs}
    with tempfile.TemporaryDirectory() as d:
        for r in range(args.rounds):
            for label, binary in bs:
                runs[label].append(one(binary, args, pathlib.Path(d) / f"{label}-{r}.json"))
    rows = []
    for label, binary in bs:
        row = {"build": label, "binary": binary, "rounds": len(runs[label])}
        for k, _ in FIELDS:
            row[k] = median([j.get(k) for j in runs[label]])
        rows.append(row)
    first = rows[0]
    for row in rows[1:]:
        for k in ("route_insert_per_s", "route_insert_per_s_native", "jit_pps"):
            row[f"{k}_vs_{first['build']}"] = row[k] / first[k] if row[k] and first[k] else None
    return rows


def show(rows, args):
    what = ("IPv6, " if args.ipv6 else "") + f"{args.routes} routes" + (f" in {args.vrfs} VRFs" if args.vrfs else "")
    print(f"p4sec bench of {len(rows)} builds taking turns, {args.rounds} rounds, {what}; medians:")
    print(f"  {'build':<12}" + "".join(f"{name:>24}" for _, name in FIELDS))
    for row in rows:
        cells = []
        for k, _ in FIELDS:
            v = row[k]
            if v is None:
                cells.append(f"{'-':>24}")
            else:
                cells.append(f"{v:>24.2f}" if k == "jit_over_native" else f"{v:>24,.0f}")
        print(f"  {row['build']:<12}" + "".join(cells))
    first = rows[0]["build"]
    def ratio(row, k):
        v = row[f"{k}_vs_{first}"]
        return "-" if v is None else f"{v:.2f}"

    for row in rows[1:]:
        print(f"  {row['build']} / {first}: installs closure {ratio(row, 'route_insert_per_s')}, native "
              f"{ratio(row, 'route_insert_per_s_native')}; native forwarding {ratio(row, 'jit_pps')}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p4sec", default=str(pathlib.Path(__file__).resolve().parent.parent / "target/release/p4sec"),
                    help="this checkout's build (default: target/release/p4sec)")
    ap.add_argument("--compare", action="append", default=[], metavar="LABEL=PATH",
                    help="another p4sec build to take turns with (repeatable)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--routes", type=int, default=10000)
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--vrfs", type=int, default=0)
    which.add_argument("--ipv6", action="store_true", help="the IPv6 router")
    ap.add_argument("--seconds", type=float, default=1.0, help="seconds each `p4sec bench` measures forwarding")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    if not args.compare:
        ap.error("--compare LABEL=PATH: at least one other build")
    if args.rounds < 1 or args.routes < 1 or args.vrfs < 0 or args.seconds <= 0:
        ap.error("--rounds and --routes take at least 1, --vrfs at least 0, --seconds more than 0")
    if not pathlib.Path(args.p4sec).is_file():
        ap.error(f"--p4sec: `{args.p4sec}` is not a file (build it: cargo build --release -p p4sec)")
    try:
        rows = run(args, ap)
    except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
        print(f"bench.router_builds: {e}", file=sys.stderr)
        return 1
    show(rows, args)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
