"""URL filtering benchmark (DeeP4R, issue #7): p4sec's URL filters against a netfilter baseline in the same run.

    python -m bench.dpi [--domains 1,10,100,1000,5000] [--flows 1,10,100,1000,10000] [--seconds S]
                               [--samples N] [--rounds R] [--systems netfilter,fast,recirc] [--flow-domains N]
                               [--json FILE] [--plot FILE.png] [--p4sec PATH]

Topology: namespace A (h1) -- veth -- namespace M (s1 | s2) -- veth -- namespace B (h2). The systems under test
run in M, one after the other, on the same namespaces:

- netfilter: the kernel forwards (ip_forward=1, addresses on s1/s2) and the FORWARD chain holds one
  `-m string --algo bm --string DOMAIN -j DROP` rule per listed domain (loaded with iptables-restore);
- fast: `p4sec switch` owns s1/s2 and runs programs/url_filter_fast.p4 (the dfa_matcher extern; the automaton
  from p4sec.dpi is loaded at run time over P4Runtime as an ExternEntry);
- recirc: `p4sec switch` with programs/url_filter.p4, the paper's design (a cloned scanner recirculating one
  payload byte per pass through the byte_class/dfa tables, written over P4Runtime); lists whose DFA does not
  fit its dfa table (2^20 entries) are skipped.

With two or more cores the sender (this process) runs on the first, and the forwarding work of the system under
test on the second: the p4sec switch process, or for netfilter the kernel's receive processing of s1 (steered
there with RPS). The sender and the switch run at nice -10.

Traffic: HTTP GET requests (TCP to port 80, valid checksums) whose Host is NOT listed, so every packet is
inspected in full and forwarded. This process holds AF_PACKET sockets in A and in B (setns), so it sends and
timestamps frames itself:

- throughput: A writes prebuilt frames as fast as it can; the figure is the frames/s arriving at h2 (its rx
  counter, read over netlink at the start and end of a --seconds window after a short warm-up);
- added latency: single frames from A, each timestamped by the kernel on arrival at h2 (SO_TIMESTAMPNS);
  median and p99 over --samples frames, minus the same system's figures with an empty list (0 domains);
- flows: the same requests over N distinct 5-tuples (source addresses and ports) at --flow-domains domains.

Every figure is the median over --rounds rounds, each round going over all list sizes of a system, so a burst
of other load on the machine spoils one round rather than one list size. Each configuration is checked in
every round: a request for a listed domain must be dropped and an unlisted one forwarded, by every system, or
the benchmark stops with an error. Needs root, iproute2 and iptables.

Its parts: dpi_common.py (constants, the namespaces and links), dpi_traffic.py (frames, the traffic generator),
dpi_systems.py (the systems under test), dpi_run.py (a run), dpi_report.py (the report and plot); this module
is the command line.
"""
import argparse
import json
import os
import pathlib
import platform
import shutil
import sys
import time
from p4sec.infra.netns import CommandError

from bench.dpi_common import (  # noqa: F401 (re-exported: the names this module always had)
    ROOT, SYSTEMS, LABEL, DFA_TABLE_SIZE, GOOD_HOSTS, SRC_IP, DST_IP, SEQ_LAT, SEQ_BLOCK, SEQ_GOOD, SEQ_LOAD,
    NICE, SO_TIMESTAMPNS, ETH_P_ALL, BenchError, LinkStats, Topology,
)
from bench.dpi_traffic import (  # noqa: F401 (re-exported: the names this module always had)
    _csum, http_request, http_frame, flow_tuple, seq_of, choose_good_host, Traffic,
)
from bench.dpi_systems import (  # noqa: F401 (re-exported: the names this module always had)
    CONTROL, P4secSwitch, free_port_in, Netfilter, Fast, Recirc,
)
from bench.dpi_report import (  # noqa: F401 (re-exported: the names this module always had)
    cell, targets, report, plot,
)
from bench.dpi_run import (  # noqa: F401 (re-exported: the names this module always had)
    pct, combine_throughput, recirc_entries, run, run_in,
)


def int_list(text, name, lo):
    try:
        xs = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BenchError(f"--{name}: expected comma-separated integers, got {text!r}")
    if not xs:
        raise BenchError(f"--{name}: empty list")
    if any(x < lo for x in xs):
        raise BenchError(f"--{name}: values must be >= {lo}, got {text!r}")
    return sorted(set(xs))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.dpi", description=__doc__.splitlines()[0])
    ap.add_argument("--domains", default="1,10,100,1000,5000", help="list sizes (comma-separated)")
    ap.add_argument("--flows", default="1,10,100,1000,10000", help="parallel flow counts (comma-separated)")
    ap.add_argument("--flow-domains", type=int, help="list size for the flow runs (default: the largest --domains)")
    ap.add_argument("--seconds", type=float, default=2.0, help="measurement window per throughput cell")
    ap.add_argument("--samples", type=int, default=300, help="latency frames per configuration and round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds over all configurations; figures are medians over rounds")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help="some of netfilter,fast,recirc")
    ap.add_argument("--json", help="write all figures as JSON")
    ap.add_argument("--plot", help="write a PNG plot")
    ap.add_argument("--p4sec", default=str(ROOT / "target" / "release" / "p4sec"), help="the p4sec binary")
    args = ap.parse_args(argv)
    try:
        args.domains = int_list(args.domains, "domains", 1)
        args.flows = int_list(args.flows, "flows", 1)
        if max(args.domains) > 200000:
            raise BenchError("--domains: at most 200000")
        if max(args.flows) > 50000:
            raise BenchError("--flows: at most 50000")
        if args.flow_domains is None:
            args.flow_domains = max(args.domains)
        if not (0 <= args.flow_domains <= 200000):
            raise BenchError("--flow-domains: must be 0..200000")
        if not (0 < args.seconds <= 600):
            raise BenchError(f"--seconds: must be in (0, 600], got {args.seconds:g}")
        if not (1 <= args.rounds <= 50):
            raise BenchError(f"--rounds: must be 1..50, got {args.rounds}")
        if not (10 <= args.samples <= 100000):
            raise BenchError(f"--samples: must be 10..100000, got {args.samples}")
        systems = [s.strip() for s in args.systems.split(",") if s.strip()]
        bad = [s for s in systems if s not in SYSTEMS]
        if bad or not systems:
            raise BenchError(f"--systems: unknown {', '.join(bad) or '(empty)'}; choose from {', '.join(SYSTEMS)}")
        args.systems = [s for s in SYSTEMS if s in systems]
        p4sec_bin = str(pathlib.Path(args.p4sec).resolve())
        if {"fast", "recirc"} & set(args.systems) and not os.access(p4sec_bin, os.X_OK):
            raise BenchError(f"--p4sec: {args.p4sec} is not an executable (build it: cargo build --release)")
        for p in (args.json, args.plot):
            if p and not pathlib.Path(p).resolve().parent.is_dir():
                raise BenchError(f"output directory of {p} does not exist")
        if os.geteuid() != 0:
            raise BenchError("needs root (network namespaces, iptables)")
        for tool in ["ip"] + (["iptables", "iptables-restore"] if "netfilter" in args.systems else []):
            if not shutil.which(tool):
                raise BenchError(f"{tool} not found (apt-get install {'iproute2' if tool == 'ip' else 'iptables'})")
        if args.plot:
            try:
                import matplotlib  # noqa: F401
            except ImportError:
                raise BenchError("--plot needs matplotlib (pip install matplotlib)")
        t0 = time.time()
        res = run(args, p4sec_bin, lambda s: print(s, flush=True))
    except (BenchError, CommandError) as e:
        print(f"bench.dpi: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench.dpi: interrupted", file=sys.stderr)
        return 130
    res["targets"] = targets(res, args)
    report(res, args)
    if args.plot:
        plot(res, args, args.plot)
        print(f"plot: {args.plot}")
    if args.json:
        doc = {"benchmark": "url_filter_dpi", "issue": 7,
               "machine": {"cores": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
                           "loadavg_at_end": open("/proc/loadavg").read().split()[:3],
                           "sender": "in-process AF_PACKET (one Python thread)", "links": "veth pairs between namespaces"},
               "parameters": {"domains": args.domains, "flows": args.flows, "flow_domains": args.flow_domains,
                              "seconds": args.seconds, "samples": args.samples, "rounds": args.rounds, "systems": args.systems,
                              "request_bytes": len(http_request(res["good_host"]))},
               "labels": {s: LABEL[s] for s in args.systems}, "elapsed_seconds": time.time() - t0, **res}
        pathlib.Path(args.json).write_text(json.dumps(doc, indent=1))
        print(f"json: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
