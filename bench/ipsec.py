"""IPsec VPN benchmarks: tunnel setup and renewal time through the controller, and TCP goodput through two p4sec
gateways per cipher suite, beside the P4-IPsec paper's BMv2 figures, in one run.

    python -m bench.ipsec [--tunnels 30] [--seconds 3] [--suites bypass,null,...] [--json FILE] [--p4sec PATH]
                                 [--no-offloads] [--no-gro] [--offloads-off-suites aes-gcm-128]
                                 [--jumbo 9000] [--jumbo-suites aes-gcm-128] [--udp-encap-suites aes-gcm-128]

Setup: the controller (in process) sets a tunnel up between the two switches (SAD-dec on both, then SAD-enc and
SPD on both, one Write per switch and phase, both switches at once) and tears it down again, --tunnels times;
renewal: one direction renewed (new SAD-dec, in-place SAD-enc swap); teardown: three phases (policies; outbound SAs,
SAD-dec entries and selectors; inbound SAs), timed too. Goodput: iperf3 TCP from H1 to H2 through
the tunnel (the topology of python -m bench.vpn_demo: links MTU 1500, hosts MTU 1400, the hosts' TSO/GSO/GRO on
as Linux sets them by default, so the switches receive TCP super-frames and cut them). Needs root; iperf3 for the
goodput part.

Hosts without offloads (--offloads-off-suites, empty to leave out): the goodput of those suites once more on a
second topology whose hosts have TSO/GSO/GRO off (every TCP segment crosses as its own frame); a separate row with
its own target verdict. --no-offloads turns the hosts' offloads off for the main rows too.

ESP in UDP (--udp-encap-suites, empty to leave out): the goodput of those suites once more with tunnels that send
ESP in UDP (RFC 3948, port 4500), on a second topology whose switches join the UDP datagrams of a flow into GSO
super-frames on transmit (P4SEC_UDP_GRO=1): the encrypting switch hands a TCP super-frame's ESP packets to the WAN
link in one frame, and the decrypting switch cuts it again; a separate row with its own target verdict.

Jumbo frames (--jumbo MTU, 0 to leave out): the goodput of --jumbo-suites once more, on a second topology whose links
all have that MTU (hosts 100 bytes less); a separate, labelled row, not the standard figure.
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from p4sec.infra import runtime
from p4sec.ipsec.controller import Gateway, IpsecController
from p4sec.infra.netns import free_port, ns, sh
from bench.vpn_demo import Net

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAPER = {"setup_ms": 5.02, "renewal_ms": 4.38, "goodput_mbps": {"bypass": 48.90, "null": 47.25, "aes-ctr-hmac-md5": 47.21}}
TARGET = {"setup_ms": 2.0, "renewal_ms": 2.0, "goodput_mbps": {"aes-gcm-128": 2000.0}}


HOST_MTU_GAP = 100  # hosts' MTU below the links': room for the ESP tunnel overhead


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def start_switches(a, net, work, mtu, udp_gro=False, tag=""):
    """Links (switch-side veths, WAN) at `mtu`, hosts at mtu - HOST_MTU_GAP (before the switches size their rings),
    two switches (`udp_gro`: joining UDP datagrams on transmit; logs switch1TAG.log, switch2TAG.log in `work`), the controller
    with both gateways (its own store, ctlTAG.db). Returns (procs,
    switches, controller)."""
    if mtu != 1500:
        for i in (net.a1, net.b1, net.wa, net.wb):
            sh("ip", "link", "set", i, "mtu", str(mtu))
        for n, h in ((net.ns1, net.h1), (net.ns2, net.h2)):
            ns(n, "ip", "link", "set", h, "mtu", str(mtu - HOST_MTU_GAP))
    env = dict(os.environ)
    env.pop("P4SEC_NO_GRO", None)
    env.pop("P4SEC_UDP_GRO", None)
    if a.no_gro:
        env["P4SEC_NO_GRO"] = "1"
    if udp_gro:
        env["P4SEC_UDP_GRO"] = "1"
    procs, ports, logs, switches = [], [], [], []
    try:
        for k, (lan, wan) in enumerate(((net.a1, net.wa), (net.b1, net.wb)), 1):
            port = free_port()
            ports.append(port)
            logs.append(work / f"switch{k}{tag}.log")
            with open(logs[-1], "w") as log:
                # (never the bench's own stdout: a switch left running would hold the pipe of whoever reads it)
                procs.append(subprocess.Popen([a.p4sec, "switch", "--grpc", f"127.0.0.1:{port}", "--port", f"1={lan}", "--port",
                                               f"2={a.wan_kind}{wan}"], stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env))
        time.sleep(0.5)
        for p, port, log in zip(procs, ports, logs):
            if p.poll() is not None:
                raise RuntimeError(f"bench.ipsec: switch on 127.0.0.1:{port} exited at start ({p.returncode}): {tail(log)}")
            try:
                switches.append(runtime.Switch(f"127.0.0.1:{port}"))
            except Exception as e:
                raise RuntimeError(f"bench.ipsec: cannot connect to the switch on 127.0.0.1:{port} ({e!r}); its log: {tail(log)}") from e
        ctl = IpsecController(str(work / f"ctl{tag}.db"), grace=0.2)
        ctl.add_gateway(Gateway("S1", switches[0], "192.0.2.1", "10.1.0.0/16", 1, net.mac_h1, 2, "02:00:00:00:00:01", "198.51.100.0/24"),
                        work / "gw")
        ctl.add_gateway(Gateway("S2", switches[1], "198.51.100.1", "10.2.0.0/16", 1, net.mac_h2, 2, "02:00:00:00:00:01", "192.0.2.0/24"),
                        work / "gw")
    except BaseException:
        stop_switches(procs, switches)
        raise
    return procs, switches, ctl


def tail(path, n=600):
    """The end of a log file (for an error message)."""
    try:
        return pathlib.Path(path).read_text(errors="replace")[-n:].strip() or "(empty)"
    except OSError as e:
        return f"(unreadable: {e})"


def stop_switches(procs, switches):
    for s in switches:
        s.close()
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def goodput(a, net, ctl, suite, tag="", encap=None):
    """iperf3 TCP H1 -> H2 through a tunnel of this suite (and encapsulation): (Mbit/s, TCP retransmissions); (None,
    None) if iperf3 failed."""
    name = f"g-{suite}{tag}"
    ctl.connect("S1", "S2", suite=suite, name=name, encap=encap)
    srv = subprocess.Popen(["ip", "netns", "exec", net.ns2, "iperf3", "-s", "-1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.4)
    try:
        r = ns(net.ns1, "iperf3", "-c", "10.2.0.2", "-t", str(a.seconds), "-J", "--connect-timeout", "5000", check=False,
               timeout=a.seconds + 30)
    except subprocess.TimeoutExpired:
        r = None
    try:
        srv.wait(timeout=a.seconds + 20)
    except subprocess.TimeoutExpired:
        srv.kill()
    ctl.disconnect(name)
    try:
        end = json.loads(r.stdout)["end"]
        return end["sum_received"]["bits_per_second"] / 1e6, end["sum_sent"].get("retransmits")
    except (AttributeError, ValueError, KeyError):
        return None, None


def extra_row(a, work, offloads, mtu, suites, tag, encap=None):
    """Goodput of `suites` (comma-separated) on a topology of its own (hosts' offloads, link MTU; `encap` "udp": ESP
    in UDP, the switches joining UDP datagrams): {suite: Mbit/s}."""
    net = Net(offloads=offloads)
    procs, switches, row = [], [], {}
    try:
        procs, switches, ctl = start_switches(a, net, work, mtu, udp_gro=encap == "udp", tag=tag)
        for suite in suites.split(","):
            row[suite], _ = goodput(a, net, ctl, suite, tag=tag, encap=encap)
        ctl.close()
    finally:
        stop_switches(procs, switches)
        net.close()
    return row


def print_row(title, row):
    """A separate goodput row ({suite: Mbit/s or None}) under its title, each suite with its target verdict."""
    if not row:
        return
    print(title)
    for suite, g in row.items():
        line = f"    {suite:<20} {g:>9.0f} Mbit/s" if g is not None else f"    {suite:<20} {'failed':>16}"
        tgt = TARGET["goodput_mbps"].get(suite)
        if tgt and g is not None:
            line += f"   target >= {tgt:.0f} Mbit/s: {'PASS' if g >= tgt else 'MISS'}"
        print(line)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tunnels", type=int, default=30)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--suites", default="bypass,null,aes-ctr-hmac-md5,aes-gcm-128,chacha20-poly1305")
    ap.add_argument("--no-offloads", dest="offloads", action="store_false",
                    help="turn the hosts' TSO/GSO/GRO off for the main rows (default: on, as Linux sets them)")
    ap.add_argument("--offloads", action="store_true", help=argparse.SUPPRESS)  # the default; kept for old scripts
    ap.set_defaults(offloads=True)
    ap.add_argument("--offloads-off-suites", default="aes-gcm-128",
                    help="also measure these suites with the hosts' offloads off, a separate row ('' to leave out)")
    ap.add_argument("--no-gro", action="store_true",
                    help="switches send every TCP segment as its own frame (P4SEC_NO_GRO=1) instead of joining a stream's into GSO super-frames")
    ap.add_argument("--jumbo", type=int, default=9000, metavar="MTU",
                    help="also measure --jumbo-suites with every link at this MTU (hosts 100 less), a separate row; 0: not")
    ap.add_argument("--jumbo-suites", default="aes-gcm-128")
    ap.add_argument("--udp-encap-suites", default="aes-gcm-128",
                    help="also measure these suites with ESP in UDP between switches joining UDP datagrams, a separate row ('' to leave out)")
    ap.add_argument("--wan", choices=("afpacket", "xdp"), default="afpacket",
                    help="how the switches open the link between them: packet socket (default) or AF_XDP")
    ap.add_argument("--json")
    ap.add_argument("--p4sec", default=str(ROOT / "target" / "release" / "p4sec"))
    a = ap.parse_args(argv)
    a.wan_kind = "xdp:" if a.wan == "xdp" else ""
    if os.geteuid() != 0:
        sys.exit("bench.ipsec: needs root (network namespaces)")
    if a.tunnels < 1 or a.seconds <= 0:
        sys.exit("bench.ipsec: --tunnels must be >= 1 and --seconds > 0")
    if a.jumbo and not 1600 <= a.jumbo <= 16000:
        sys.exit("bench.ipsec: --jumbo must be 0 or an MTU of 1600..16000")
    work = pathlib.Path(tempfile.mkdtemp(prefix="p4sec-bench-ipsec-"))
    sh(a.p4sec, "compile", str(ROOT / "programs" / "ipsec_gateway.p4"), "-o", str(work / "gw"))
    net = Net(offloads=a.offloads)
    procs, switches = [], []
    res = {"setup_ms": [], "renewal_ms": [], "teardown_ms": [], "goodput_mbps": {}, "retransmits": {}, "goodput_no_offloads_mbps": {}, "goodput_jumbo_mbps": {},
           "goodput_udp_encap_mbps": {}}
    try:
        procs, switches, ctl = start_switches(a, net, work, 1500)
        # warm-up (connections, first writes), not measured
        ctl.connect("S1", "S2", name="warm")
        ctl.disconnect("warm")
        for i in range(a.tunnels):
            t0 = time.perf_counter()
            ctl.connect("S1", "S2", name=f"t{i}")
            res["setup_ms"].append(1000 * (time.perf_counter() - t0))
            spi = next(s["spi"] for s in ctl.sas(f"t{i}") if s["state"] == "active" and s["src"] == "S1")
            t0 = time.perf_counter()
            ctl.renew(spi)
            res["renewal_ms"].append(1000 * (time.perf_counter() - t0))
            time.sleep(0.25)  # the old SAD-dec entry goes after the grace period
            t0 = time.perf_counter()
            ctl.disconnect(f"t{i}")
            res["teardown_ms"].append(1000 * (time.perf_counter() - t0))

        if shutil.which("iperf3"):
            for suite in a.suites.split(","):
                res["goodput_mbps"][suite], res["retransmits"][suite] = goodput(a, net, ctl, suite)
        ctl.close()
    finally:
        stop_switches(procs, switches)
        net.close()
    if a.offloads and a.offloads_off_suites and shutil.which("iperf3"):
        # hosts without offloads: every segment its own frame through both switches
        res["goodput_no_offloads_mbps"] = extra_row(a, work, False, 1500, a.offloads_off_suites, "-nooffl")
    if a.udp_encap_suites and shutil.which("iperf3"):
        res["goodput_udp_encap_mbps"] = extra_row(a, work, a.offloads, 1500, a.udp_encap_suites, "-udp", encap="udp")
    if a.jumbo and shutil.which("iperf3"):
        # the switches size their rings for the MTU they find when they start
        res["goodput_jumbo_mbps"] = extra_row(a, work, a.offloads, a.jumbo, a.jumbo_suites, "-jumbo")

    s, r = res["setup_ms"], res["renewal_ms"]
    out = {"tunnels": a.tunnels, "setup_ms_median": statistics.median(s), "setup_ms_p90": pct(s, 90),
           "renewal_ms_median": statistics.median(r), "renewal_ms_p90": pct(r, 90),
           "teardown_ms_median": statistics.median(res["teardown_ms"]), "teardown_ms_p90": pct(res["teardown_ms"], 90), "goodput_mbps": res["goodput_mbps"],
           "goodput_retransmits": res["retransmits"], "goodput_no_offloads_mbps": res["goodput_no_offloads_mbps"],
           "link_mtu": 1500, "host_mtu": 1500 - HOST_MTU_GAP, "offloads": a.offloads, "switch_gro": not a.no_gro, "wan": a.wan,
           "goodput_jumbo_mbps": res["goodput_jumbo_mbps"], "jumbo_link_mtu": a.jumbo or None, "goodput_udp_encap_mbps": res["goodput_udp_encap_mbps"],
           "jumbo_host_mtu": (a.jumbo - HOST_MTU_GAP) if a.jumbo else None, "paper": PAPER, "target": TARGET}
    print(f"p4sec IPsec VPN, two p4sec switches + controller on this machine ({a.tunnels} tunnels)")
    print(f"  {'':<22} {'median':>9} {'p90':>9} {'paper (BMv2)':>13} {'target':>8}")
    for k, label in (("setup", "tunnel setup"), ("renewal", "SA renewal")):
        med, p90 = out[f"{k}_ms_median"], out[f"{k}_ms_p90"]
        verdict = "PASS" if med <= TARGET[f"{k}_ms"] else "MISS"
        print(f"  {label:<22} {med:>7.2f}ms {p90:>7.2f}ms {PAPER[f'{k}_ms']:>11.2f}ms {TARGET[f'{k}_ms']:>6.1f}ms {verdict}")
    print(f"  {'tunnel teardown':<22} {out['teardown_ms_median']:>7.2f}ms {out['teardown_ms_p90']:>7.2f}ms {'-':>13} {'-':>8}")
    if res["goodput_mbps"]:
        how = ("hosts' offloads on, the Linux default" if a.offloads else "hosts' offloads off") + (", switch GRO off" if a.no_gro else "")
        print(f"  TCP goodput H1 -> H2 (iperf3, {a.seconds:g} s per suite; links MTU 1500, hosts {1500 - HOST_MTU_GAP}; {how})")
        for suite, g in res["goodput_mbps"].items():
            paper = PAPER["goodput_mbps"].get(suite)
            tgt = TARGET["goodput_mbps"].get(suite)
            line = f"    {suite:<20} {g:>9.0f} Mbit/s" if g is not None else f"    {suite:<20} {'failed':>16}"
            if paper:
                line += f"   paper (BMv2): {paper:.2f} Mbit/s"
            if tgt and g is not None:
                line += f"   target >= {tgt:.0f} Mbit/s: {'PASS' if g >= tgt else 'MISS'}"
            if res["retransmits"].get(suite) is not None:
                line += f"   ({res['retransmits'][suite]} TCP retransmissions)"
            print(line)
    print_row(f"  Hosts' offloads off (TSO/GSO/GRO off: every TCP segment its own frame), links MTU 1500, hosts {1500 - HOST_MTU_GAP}",
              res["goodput_no_offloads_mbps"])
    print_row(f"  ESP in UDP (RFC 3948, port 4500), the switches joining a flow's datagrams into GSO super-frames (P4SEC_UDP_GRO=1); "
              f"links MTU 1500, hosts {1500 - HOST_MTU_GAP}", res["goodput_udp_encap_mbps"])
    if res["goodput_jumbo_mbps"]:
        print(f"  Jumbo frames, NOT the standard figure: links MTU {a.jumbo}, hosts {a.jumbo - HOST_MTU_GAP}")
        for suite, g in res["goodput_jumbo_mbps"].items():
            print(f"    {suite + ' (jumbo)':<20} {g:>9.0f} Mbit/s" if g is not None else f"    {suite + ' (jumbo)':<20} {'failed':>16}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
