"""IKEv2 benchmark: tunnel setup time, TCP goodput and CHILD_SA rekey latency of

    p4sec<->strongSwan   a p4sec gateway (charon + the p4sec plugin) to stock strongSwan with kernel-libipsec
    p4sec<->p4sec IKE    two p4sec gateways, each with its charon and controller
    strongSwan<->strongSwan  both with kernel-libipsec (userspace ESP), no p4sec at all
    p4sec IKE-less       two p4sec gateways under one controller (keys set without IKE)

Setup: from `swanctl --initiate` to its return (IKE_SA_INIT, IKE_AUTH with the CHILD_SA installed), --setups times
with a terminate in between; IKE-less: the controller's connect(). Goodput: iperf3 TCP from the left site's host to
the right site's for --seconds. Rekey latency: from `swanctl --rekey --child` until the new outbound SA is the one
in use (its SPI in `swanctl --list-sas` on the initiator). AES-GCM-128 everywhere; ESP in UDP wherever libipsec is
one end (it always encapsulates), plain ESP otherwise. Needs root, strongSwan and the p4sec plugin (scripts/setup).

    python -m bench.ikev2 [--setups 5] [--seconds 3] [--json FILE] [--p4sec PATH]
"""
import argparse
import json
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

from bench.ikev2_rig import V4, conn, libipsec_pair, missing, p4sec_pair, psk, sites

ROOT = pathlib.Path(__file__).resolve().parents[1]
SECRET = "p4sec-bench-secret-0123456789abcdef"


def iperf(client_ns, server_ns, server_addr, seconds, bind=None):
    """iperf3 TCP goodput client -> server in Mbit/s, or None if iperf3 failed."""
    srv = subprocess.Popen(["ip", "netns", "exec", server_ns, "iperf3", "-s", "-1", "-B", server_addr],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        cmd = ["ip", "netns", "exec", client_ns, "iperf3", "-c", server_addr, "-t", str(seconds), "-J", "--connect-timeout", "5000"]
        if bind:
            cmd += ["-B", bind]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30)
        try:
            return round(json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6, 1)
        except (ValueError, KeyError):
            return None
    finally:
        if srv.poll() is None:
            srv.kill()
        srv.wait()


def timed_setups(initiator, n):
    """Setup times (ms) of n `swanctl --initiate`, the IKE_SA terminated in between (the last one stays up)."""
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        r = initiator.swanctl("--initiate", "--child", "net", "--timeout", "20", check=False)
        out.append(round(1000 * (time.perf_counter() - t0), 2))
        if "initiate completed successfully" not in r.stdout:
            raise RuntimeError(f"setup failed: {r.stdout[-2000:]}")
        if i < n - 1:
            initiator.swanctl("--terminate", "--ike", "site", "--timeout", "20")
    return out


def out_spis(charon):
    return set(re.findall(r"out ([0-9a-f]{8})", charon.swanctl("--list-sas").stdout))


def rekey_latency(charon, tries=3):
    """ms from `swanctl --rekey --child net` until a new outbound SA is installed (its SPI listed), per try."""
    out = []
    for _ in range(tries):
        old = out_spis(charon)
        t0 = time.perf_counter()
        charon.swanctl("--rekey", "--child", "net")
        while not out_spis(charon) - old:
            if time.perf_counter() - t0 > 20:
                raise RuntimeError("rekey did not finish in 20 s")
            time.sleep(0.002)
        out.append(round(1000 * (time.perf_counter() - t0), 2))
        time.sleep(0.5)
    return out


def summary(setups, goodput, rekeys):
    return {"setup_ms": setups, "setup_ms_median": statistics.median(setups), "goodput_mbps": goodput,
            "rekey_ms": rekeys, "rekey_ms_median": statistics.median(rekeys) if rekeys else None}


def p4sec_strongswan(p4sec_bin, tmp, a):
    with sites(p4sec_bin, tmp / "ps", V4) as s:
        ad = s["addrs"]
        mine, theirs = s["p4sec_charon"].start(), s["remote_charon"].start()
        mine.load(conn(ad["gw"], ad["peer"], "gw-a", "site-b", ad["lan"], ad["rlan"]) + psk("gw-a", "site-b", SECRET))
        theirs.load(conn(ad["peer"], ad["gw"], "site-b", "gw-a", ad["rlan"], ad["lan"]) + psk("site-b", "gw-a", SECRET))
        setups = timed_setups(mine, a.setups)
        goodput = iperf(s["ns"]["lan"], s["ns"]["remote"], ad["rhost"], a.seconds)
        return summary(setups, goodput, rekey_latency(mine))


def p4sec_p4sec(p4sec_bin, tmp, a):
    with p4sec_pair(p4sec_bin, tmp / "pp") as p:
        sa, sb = p["side"]["A"], p["side"]["B"]
        p["A"]["charon"].start().load(conn(sa["gw"], sb["gw"], "gw-a", "gw-b", sa["lan"], sb["lan"]) + psk("gw-a", "gw-b", SECRET))
        p["B"]["charon"].start().load(conn(sb["gw"], sa["gw"], "gw-b", "gw-a", sb["lan"], sa["lan"]) + psk("gw-b", "gw-a", SECRET))
        setups = timed_setups(p["A"]["charon"], a.setups)
        goodput = iperf(p["ns"]["lanA"], p["ns"]["lanB"], sb["host"], a.seconds)
        return summary(setups, goodput, rekey_latency(p["A"]["charon"]))


def strongswan_strongswan(tmp, a):
    with libipsec_pair(tmp / "ss") as p:
        addr = p["addr"]
        p["A"].start().load(conn(addr["A"], addr["B"], "site-a", "site-b", "10.1.0.0/16", "10.2.0.0/16") + psk("site-a", "site-b", SECRET))
        p["B"].start().load(conn(addr["B"], addr["A"], "site-b", "site-a", "10.2.0.0/16", "10.1.0.0/16") + psk("site-b", "site-a", SECRET))
        setups = timed_setups(p["A"], a.setups)
        goodput = iperf(p["ns"]["A"], p["ns"]["B"], "10.2.0.1", a.seconds, bind="10.1.0.1")
        return summary(setups, goodput, rekey_latency(p["A"]))


def p4sec_ikeless(p4sec_bin, tmp, a):
    with p4sec_pair(p4sec_bin, tmp / "il", ikeless=True) as p:
        ctl = p["A"]["ctl"]
        setups = []
        for i in range(a.setups):
            t0 = time.perf_counter()
            ctl.connect("A", "B", "aes-gcm-128", name="A-B")
            setups.append(round(1000 * (time.perf_counter() - t0), 2))
            if i < a.setups - 1:
                ctl.disconnect("A-B")
        goodput = iperf(p["ns"]["lanA"], p["ns"]["lanB"], p["side"]["B"]["host"], a.seconds)
        rekeys = []
        for _ in range(3):
            t0 = time.perf_counter()
            ctl.rekey("A-B")
            rekeys.append(round(1000 * (time.perf_counter() - t0), 2))
        return summary(setups, goodput, rekeys)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.ikev2", description=__doc__.split("\n\n")[0])
    ap.add_argument("--setups", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--p4sec", default=str(ROOT / "target" / "release" / "p4sec"))
    a = ap.parse_args(argv)
    if a.setups < 1 or a.seconds < 1:
        print("bench.ikev2: --setups and --seconds must be at least 1", file=sys.stderr)
        return 2
    why = missing()
    if why:
        print(f"bench.ikev2: {why}", file=sys.stderr)
        return 1
    res = {}
    with tempfile.TemporaryDirectory(prefix="p4sec-ikev2-") as d:
        tmp = pathlib.Path(d)
        for name, fn in (("p4sec<->strongSwan", lambda: p4sec_strongswan(a.p4sec, tmp, a)),
                         ("p4sec<->p4sec IKEv2", lambda: p4sec_p4sec(a.p4sec, tmp, a)),
                         ("strongSwan<->strongSwan libipsec", lambda: strongswan_strongswan(tmp, a)),
                         ("p4sec IKE-less", lambda: p4sec_ikeless(a.p4sec, tmp, a))):
            print(f"bench.ikev2: {name} ...", file=sys.stderr, flush=True)
            res[name] = fn()
    print(f"{'pair':<34} {'setup ms (median)':>18} {'goodput Mbit/s':>15} {'rekey ms (median)':>18}")
    for name, r in res.items():
        print(f"{name:<34} {r['setup_ms_median']:>18.2f} {r['goodput_mbps'] if r['goodput_mbps'] is not None else 'n/a':>15} "
              f"{r['rekey_ms_median']:>18.2f}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
