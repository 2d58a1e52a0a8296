"""A P4 program and a P4Runtime controller on p4sec, the steps of docs/p4runtime-controller.md run for you:
compile programs/ipv4_router.p4, start `p4sec switch` with two TAP ports and no program, push the program with
p4runtime-shell's FwdPipeConfig, insert one route, send a UDP packet into the first TAP and catch it on the
second, rewritten by the program (next hop's MAC, TTL - 1).

    python -m bench.p4rt_demo [--p4sec PATH] [--summary FILE]      (needs root: TAP devices)
"""
import argparse
import contextlib
import io
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import uuid

from p4sec.infra.netns import free_port

ROOT = pathlib.Path(__file__).resolve().parents[1]


def step(msg):
    print(f"\n== {msg}", flush=True)


def wait_listening(port, proc, timeout=30):
    import grpc
    ch = grpc.insecure_channel(f"localhost:{port}")
    try:
        grpc.channel_ready_future(ch).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        raise SystemExit(f"p4rt_demo: the switch does not listen on localhost:{port} (exit {proc.poll()})") from None
    finally:
        ch.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--p4sec", default=str(ROOT / "target" / "release" / "p4sec"), help="the p4sec binary")
    ap.add_argument("--summary", metavar="FILE", help="write the outcome as JSON to FILE (scripts/demo)")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("p4rt_demo: needs root (the switch creates TAP devices)")
    import p4runtime_sh.shell as sh
    from scapy.all import IP, UDP, AsyncSniffer, Ether, sendp
    work = pathlib.Path(tempfile.mkdtemp(prefix="p4sec-p4rt-"))
    tag = uuid.uuid4().hex[:5]
    tap1, tap2 = f"p4tap1{tag}", f"p4tap2{tag}"
    port = free_port()
    result = {"compiled": False, "forwarded": False}
    step("p4sec compile programs/ipv4_router.p4 -o out/router")
    t = time.time()
    subprocess.run([a.p4sec, "compile", str(ROOT / "programs" / "ipv4_router.p4"), "-o", str(work / "router")], check=True,
                   stdout=subprocess.DEVNULL)
    result["compiled"] = True
    result["compile_ms"] = round((time.time() - t) * 1000)
    print(f"   {', '.join(sorted(p.name for p in (work / 'router').iterdir()))} in {result['compile_ms']} ms")
    step(f"p4sec switch --port 1=tap:{tap1} --port 2=tap:{tap2} --grpc localhost:{port}   (no program yet)")
    sw = subprocess.Popen([a.p4sec, "switch", "--port", f"1=tap:{tap1}", "--port", f"2=tap:{tap2}", "--grpc", f"localhost:{port}"],
                          stderr=open(work / "switch.log", "w"))
    try:
        wait_listening(port, sw)
        step("p4runtime-shell: FwdPipeConfig (the program), then one route: 10.2.0.0/16 -> port 2")
        sh.setup(device_id=1, grpc_addr=f"localhost:{port}", election_id=(0, 1),
                 config=sh.FwdPipeConfig(str(work / "router" / "p4info.txtpb"), str(work / "router" / "program.json")))
        with contextlib.redirect_stdout(io.StringIO()):    # (p4runtime-shell echoes each field it is given)
            te = sh.TableEntry("RouterIngress.ipv4_lpm")(action="RouterIngress.set_nhop")
            te.match["hdr.ipv4.dst_addr"] = "10.2.0.0/16"
            te.action["dst_mac"] = "02:00:00:00:00:02"
            te.action["src_mac"] = "02:00:00:00:00:01"
            te.action["port"] = "2"
            te.insert()
        n = len(list(sh.TableEntry("RouterIngress.ipv4_lpm").read()))
        print(f"   RouterIngress.ipv4_lpm: hdr.ipv4.dst_addr 10.2.0.0/16 -> set_nhop(dst_mac 02:00:00:00:00:02, "
              f"src_mac 02:00:00:00:00:01, port 2); read back: {n} entry")
        step(f"a UDP packet into {tap1} (10.1.0.1 -> 10.2.0.2, TTL 64); what comes out of {tap2}")
        sniff = AsyncSniffer(iface=tap2, filter="udp", count=1, timeout=5)
        sniff.start()
        time.sleep(0.5)
        sendp(Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:0a") / IP(src="10.1.0.1", dst="10.2.0.2", ttl=64)
              / UDP(sport=1234, dport=5678) / b"hello p4sec", iface=tap1, verbose=False)
        sniff.join()
        got = sniff.results or []
        if got:
            p = got[0]
            print(f"   out of port 2: {p[Ether].src} > {p[Ether].dst}, {p[IP].src} > {p[IP].dst} TTL {p[IP].ttl}, "
                  f"payload {bytes(p[UDP].payload)!r}")
            result["forwarded"] = p[Ether].dst == "02:00:00:00:00:02" and p[IP].ttl == 63
        else:
            print("   nothing came out of port 2 within 5 s")
        print("\nP4Runtime demo:", "OK" if result["forwarded"] else "FAILED")
    finally:
        try:
            sh.teardown()
        except Exception:  # noqa: BLE001 (not set up: nothing to tear down)
            pass
        sw.terminate()
        sw.wait(timeout=10)
    if a.summary:
        pathlib.Path(a.summary).write_text(json.dumps(result))
    return 0 if result["forwarded"] else 1


if __name__ == "__main__":
    sys.exit(main())
