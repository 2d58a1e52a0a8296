"""URL filtering benchmark (`python -m bench.dpi`): one run over every system, domain count and flow
count, in a fresh work directory."""
import contextlib
import os
import pathlib
import shutil
import statistics
import tempfile
import time
from p4sec import dpi
from p4sec.infra.netns import sh
from bench.dpi_common import ROOT, LABEL, DFA_TABLE_SIZE, SEQ_LAT, SEQ_BLOCK, SEQ_GOOD, SEQ_LOAD, NICE, BenchError, Topology
from bench.dpi_traffic import http_frame, flow_tuple, choose_good_host, Traffic
from bench.dpi_systems import Netfilter, Fast, Recirc
from bench.dpi_report import cell


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(q * (len(xs) - 1)))))]


def combine_throughput(ms):
    """The median over rounds of the arrival rate (and of the offered rate); frames counted in all rounds."""
    return {"pps": statistics.median(m["pps"] for m in ms), "best_pps": max(m["pps"] for m in ms),
            "offered_pps": statistics.median(m["offered_pps"] for m in ms),
            "forwarded": sum(m["forwarded"] for m in ms), "sent": sum(m["sent"] for m in ms),
            "round_pps": [m["pps"] for m in ms], "round_sub_window_pps": [m["sub_window_pps"] for m in ms]}


def recirc_entries(n, cache={}):
    if n not in cache:
        cache[n] = sum(1 for _ in dpi.Dfa(dpi.generated_domains(n), payload=True).entries()) if n else 0
    return cache[n]


def run(args, p4sec_bin, log):
    work = pathlib.Path(tempfile.mkdtemp(prefix="p4sec-bench-dpi-"))
    try:
        return run_in(work, args, p4sec_bin, log)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_in(work, args, p4sec_bin, log):
    if {"fast", "recirc"} & set(args.systems):
        # the whole run uses one copy of the binary, even if the tree is rebuilt meanwhile
        shutil.copy2(p4sec_bin, work / "p4sec")
        p4sec_bin = str(work / "p4sec")
    counts = sorted(set([0] + args.domains + [args.flow_domains]))
    biggest = max(counts)
    all_domains = dpi.generated_domains(biggest)
    lists = {}
    for n in counts:
        lists[n] = work / f"domains-{n}.txt"
        lists[n].write_text("".join(d + "\n" for d in all_domains[:n]))
    good_host = choose_good_host(all_domains)
    progs = {}
    for sysname, prog in (("fast", "url_filter_fast.p4"), ("recirc", "url_filter.p4")):
        if sysname in args.systems:
            progs[sysname] = work / sysname
            sh(p4sec_bin, "compile", str(ROOT / "programs" / prog), "-o", str(progs[sysname]))
    res = {"cells": [], "flows": [], "skipped": [], "good_host": good_host}
    if {"fast", "recirc"} & set(args.systems):
        import hashlib
        res["p4sec_binary"] = {"path": args.p4sec, "sha256": hashlib.sha256(pathlib.Path(p4sec_bin).read_bytes()).hexdigest()[:16],
                               "modified": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(os.stat(p4sec_bin).st_mtime))}
    t = Topology()
    traffic = None
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.sched_setaffinity(0, {t.cpus[0]})
        # the sender, and the switch and its control client started from here, at nice -10: other load on a shared
        # machine disturbs the measurement less (the kernel's softirq work of netfilter has priority anyway)
        os.setpriority(os.PRIO_PROCESS, 0, min(nice, NICE))
        traffic = Traffic(t)
        dst, src = t.mac[t.s1], t.mac[t.h1]
        load_frames = [http_frame(dst, src, good_host, SEQ_LOAD + i) for i in range(64)]
        lat_frames = [http_frame(dst, src, good_host, SEQ_LAT + i) for i in range(args.samples)]
        flow_frames = {}
        for nf in args.flows:
            per = [http_frame(dst, src, good_host, SEQ_LOAD + i, *flow_tuple(i)) for i in range(nf)]
            flow_frames[nf] = [per[i % nf] for i in range(max(nf, 1024))]
        probe = [0]

        def measure(system, sysname, n):
            """One round of one configuration: the listed-domain check, throughput, latency."""
            m = {}
            if n:
                probe[0] += 1
                listed = all_domains[(n - 1) // 2]
                blocked = [http_frame(dst, src, h, SEQ_BLOCK + probe[0] * 16 + i) for i, h in enumerate([listed, "www." + listed])]
                chk = traffic.check_blocking(blocked, http_frame(dst, src, good_host, SEQ_GOOD + probe[0]))
                chk["listed_domain"] = listed
                if not chk["ok"]:
                    extra = f"; switch counters {system.counters()}" if hasattr(system, "counters") else ""
                    raise BenchError(f"{LABEL[sysname]} with {n} domains: listed-domain check failed: {chk}{extra}")
                m["block_check"] = chk
            m["throughput"] = traffic.blast(load_frames, args.seconds)
            traffic.settle()
            lat, lost = traffic.latency(lat_frames)
            if len(lat) < max(1, len(lat_frames) // 2):
                raise BenchError(f"{LABEL[sysname]} with {n} domains: {lost} of {len(lat_frames)} latency frames lost")
            m["latency_us"] = {"median": statistics.median(lat), "p99": pct(lat, 0.99), "min": min(lat), "samples": len(lat), "lost": lost}
            if hasattr(system, "counters"):
                m["switch_counters"] = system.counters()
            return m

        for sysname in args.systems:
            log(f"[{LABEL[sysname]}]")
            if sysname == "netfilter":
                system = Netfilter(t, work)
            elif sysname == "fast":
                system = Fast(t, p4sec_bin, work, progs["fast"])
            else:
                system = Recirc(t, p4sec_bin, work, progs["recirc"])
            try:
                sizes = []
                for n in sorted(set([0] + args.domains)):
                    if sysname == "recirc" and recirc_entries(n) > DFA_TABLE_SIZE:
                        res["skipped"].append({"system": sysname, "domains": n, "reason":
                                               f"{recirc_entries(n):,} DFA entries exceed the dfa table ({DFA_TABLE_SIZE:,})"})
                        log(f"  {n:>6} domains: skipped ({recirc_entries(n):,} DFA entries > table size {DFA_TABLE_SIZE:,})")
                    else:
                        sizes.append(n)
                # rounds interleaved over the list sizes; each figure is the median over the rounds
                rounds = {n: [] for n in sizes}
                infos = {}
                for r in range(args.rounds):
                    for n in sizes:
                        infos[n] = system.load(n, lists[n])
                        m = measure(system, sysname, n)
                        rounds[n].append(m)
                        tp, lt = m["throughput"], m["latency_us"]
                        log(f"  round {r + 1}/{args.rounds} {n:>6} domains: {tp['pps'] / 1e3:9.1f} kpps (offered {tp['offered_pps'] / 1e3:.0f}k), "
                            f"latency median {lt['median']:8.1f} us, p99 {lt['p99']:8.1f} us"
                            + (f", load {infos[n]['load_seconds']:.1f} s" if "load_seconds" in infos[n] else ""))
                baseline = None
                for n in sizes:
                    ms = rounds[n]
                    cell = {"system": sysname, "domains": n, "config": infos[n], "rounds": len(ms),
                            "throughput": combine_throughput([m["throughput"] for m in ms]),
                            "latency_us": {"median": statistics.median(m["latency_us"]["median"] for m in ms),
                                           "p99": statistics.median(m["latency_us"]["p99"] for m in ms),
                                           "min": min(m["latency_us"]["min"] for m in ms),
                                           "samples": sum(m["latency_us"]["samples"] for m in ms),
                                           "lost": sum(m["latency_us"]["lost"] for m in ms),
                                           "round_medians": [m["latency_us"]["median"] for m in ms],
                                           "round_p99s": [m["latency_us"]["p99"] for m in ms]}}
                    if n:
                        chks = [m["block_check"] for m in ms]
                        cell["block_check"] = {"ok": all(c["ok"] for c in chks), "listed_domain": chks[0]["listed_domain"],
                                               "blocked_sent": sum(c["blocked_sent"] for c in chks),
                                               "blocked_arrived": sum(c["blocked_arrived"] for c in chks),
                                               "unlisted_arrived": all(c["unlisted_arrived"] for c in chks), "checks": len(chks)}
                    if "switch_counters" in ms[-1]:
                        cell["switch_counters"] = ms[-1]["switch_counters"]
                    if n == 0:
                        baseline = cell["latency_us"]
                    if baseline:
                        cell["added_latency_us"] = {"median": cell["latency_us"]["median"] - baseline["median"],
                                                    "p99": cell["latency_us"]["p99"] - baseline["p99"]}
                    res["cells"].append(cell)
                fd = args.flow_domains
                if sysname == "recirc" and recirc_entries(fd) > DFA_TABLE_SIZE:
                    fd = max([n for n in counts if recirc_entries(n) <= DFA_TABLE_SIZE], default=0)
                if args.flows:
                    system.load(fd, lists[fd])
                    fr = {nf: [] for nf in args.flows}
                    for r in range(args.rounds):
                        for nf in args.flows:
                            tp = traffic.blast(flow_frames[nf], args.seconds)
                            traffic.settle()
                            fr[nf].append(tp)
                            log(f"  round {r + 1}/{args.rounds} {nf:>6} flows ({fd} domains): {tp['pps'] / 1e3:9.1f} kpps "
                                f"(offered {tp['offered_pps'] / 1e3:.0f}k)")
                    for nf in args.flows:
                        res["flows"].append({"system": sysname, "flows": nf, "domains": fd, "rounds": len(fr[nf]),
                                             "throughput": combine_throughput(fr[nf])})
            finally:
                system.close()
    finally:
        os.sched_setaffinity(0, t.cpus)
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        if traffic:
            traffic.close()
        t.close()
    return res
