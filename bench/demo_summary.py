"""The summary at the end of scripts/demo: what each part showed, from the JSON files the parts wrote into one
directory (vpn.json, p4rt.json, stf.txt, bench.json, hash.json, ipsec.json), each headline figure beside what it
is compared with. A part that did not run is listed with the reason; the exit status is 1 if a part that ran
failed.

    python -m bench.demo_summary DIR [--root 0|1] [--seconds N]
"""
import argparse
import json
import pathlib
import sys

# the P4-IPsec paper's BMv2 figures (bench/ipsec.py PAPER): TCP goodput through the tunnel, setup, renewal
PAPER_GOODPUT = "47-49 Mbit/s"
PAPER_SETUP_MS, PAPER_RENEWAL_MS = 5.02, 4.38


def load(d, name):
    try:
        return json.loads((d / name).read_text())
    except (OSError, ValueError):
        return None


def lines(d, root):
    """(part, ok: True/False/None for not run, what it showed)"""
    needs_root = "not run: needs root" if not root else "did not finish (its output above)"
    v = load(d, "vpn.json")
    if v:
        gp = f"; TCP goodput {v['goodput_mbps']} Mbit/s (the P4-IPsec paper's BMv2: {PAPER_GOODPUT})" if v.get("goodput_mbps") else ""
        yield ("IPsec VPN", v["ok"], f"{v['received']}/2 datagrams H1 -> H2 through an {v['suite']} tunnel, {v['decrypted']} "
               f"captured ESP packets decrypted by scapy, renewal {'OK' if v['renewed'] else 'FAILED'}{gp}")
    else:
        yield ("IPsec VPN", None if not root else False, needs_root)
    p = load(d, "p4rt.json")
    if p:
        yield ("P4 + P4Runtime", p["forwarded"], f"programs/ipv4_router.p4 compiled ({p.get('compile_ms', '?')} ms), pushed by "
               f"p4runtime-shell, one route; a packet {'forwarded, TTL 64 -> 63' if p['forwarded'] else 'NOT forwarded'}")
    else:
        yield ("P4 + P4Runtime", None if not root else False, needs_root)
    try:
        stf = (d / "stf.txt").read_text().strip()
        yield ("STF conformance", True, f"{stf} (the reference compiler's corpus; reasons in docs/conformance.md)")
    except OSError:
        yield ("STF conformance", None, "not run: the shared corpora are not there (P4SEC_SHARED)")
    b = load(d, "bench.json")
    if b:
        yield ("forwarding", True, f"{b['engine_pps'] / 1e6:.2f} Mpps on one core, 64-byte packets through ipv4_router.p4 "
               f"(a native Rust router doing the same work: {b['native_pps'] / 1e6:.2f} Mpps)")
    else:
        yield ("forwarding", False, "p4sec bench did not finish")
    h = load(d, "hash.json")
    if h:
        sizes = h["sizes"]
        sip = next(r for r in h["p4sec_percent_line_rate"] if r["algorithm"] == "SipHash-2-4")
        best = [max(r["percent"][i] for r in h["paper"] if r["algorithm"] == "SipHash-2-4") for i in range(len(sizes))]
        yield ("keyed hashing", True, f"SipHash-2-4 over whole frames at {sip['percent'][0]:.0f} % of 10 GbE line rate at "
               f"{sizes[0]} B and {sip['percent'][-1]:.0f} % at {sizes[-1]} B (the paper's best SipHash platform: "
               f"{best[0]:.0f} % and {best[-1]:.0f} %)")
    else:
        yield ("keyed hashing", False, "p4sec bench-hash did not finish")
    s = load(d, "ipsec.json")
    if s:
        yield ("tunnel setup", True, f"{s['setup_ms_median']:.2f} ms median, renewal {s['renewal_ms_median']:.2f} ms, over "
               f"{s['tunnels']} tunnels (the P4-IPsec paper on BMv2: {PAPER_SETUP_MS} ms and {PAPER_RENEWAL_MS} ms)")
    else:
        yield ("tunnel setup", None if not root else False, needs_root)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the directory the demo's parts wrote their results into")
    ap.add_argument("--root", type=int, default=1, help="1 if the demo ran as root (else the parts that need it were skipped)")
    ap.add_argument("--seconds", type=int, help="how long the demo took")
    a = ap.parse_args(argv)
    rows = list(lines(pathlib.Path(a.dir), a.root))
    took = f" (the demo took {a.seconds // 60} min {a.seconds % 60} s)" if a.seconds is not None else ""
    print(f"== what the demo showed{took}")
    for part, ok, what in rows:
        mark = {True: "ok  ", False: "FAIL", None: "skip"}[ok]
        print(f"  {mark} {part:<16} {what}")
    failed = [r[0] for r in rows if r[1] is False]
    skipped = [r[0] for r in rows if r[1] is None]
    verdict = "FAILED: " + ", ".join(failed) if failed else "all parts that ran worked"
    print(f"demo: {verdict}" + (f" ({len(skipped)} skipped: {', '.join(skipped)})" if skipped else ""))
    print("next: README.md 'Where next' (guides for your own P4 program, a two-site VPN, the switch)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
