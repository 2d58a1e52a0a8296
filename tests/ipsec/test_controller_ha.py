"""A highly available controller: two replicas on a PostgreSQL store started here (the Debian package that
scripts/setup installs), two switches, a tunnel renewing its SAs continuously under traffic. The leader is lost
(SIGSTOP: gone for the others, but still alive): the follower must lead within 5 s (a new term, its election id),
the stream must lose no packet, and when the old leader resumes none of its writes may land: it finds itself
deposed and exits, and the switches still hold exactly the recorded state."""
import glob
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

from conftest import ROOT
from p4sec.netns import free_port
from test_site_to_site import net  # noqa: F401 (fixture)
from test_vpn_suites_and_renewal import STREAM

PG_BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
try:
    import psycopg2  # noqa: F401
    HAVE_PSYCOPG = True
except ImportError:
    HAVE_PSYCOPG = False

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
              pytest.mark.skipif(not PG_BIN, reason="PostgreSQL is not installed (./scripts/setup installs it)"),
              pytest.mark.skipif(not HAVE_PSYCOPG, reason="psycopg2 is not installed (./scripts/setup installs it)")]


@pytest.fixture
def postgres():
    """A PostgreSQL server of its own (unix socket only), trust authentication, database p4sec."""
    bin_ = PG_BIN[-1]
    work = tempfile.mkdtemp(prefix="p4sec-pg-")
    pw = pwd.getpwnam("postgres")
    os.chown(work, pw.pw_uid, pw.pw_gid)
    port = free_port()
    as_pg = ["runuser", "-u", "postgres", "--"]
    subprocess.run(as_pg + [f"{bin_}/initdb", "-D", f"{work}/data", "--auth=trust", "-U", "postgres"], check=True, capture_output=True)
    subprocess.run(as_pg + [f"{bin_}/pg_ctl", "-D", f"{work}/data", "-l", f"{work}/log", "-w", "-o",
                            f"-k {work} -p {port} -c listen_addresses='' -c fsync=off", "start"], check=True, capture_output=True)
    try:
        subprocess.run(as_pg + [f"{bin_}/createdb", "-h", work, "-p", str(port), "p4sec"], check=True, capture_output=True)
        yield f"host={work} port={port} dbname=p4sec user=postgres"
    finally:
        subprocess.run(as_pg + [f"{bin_}/pg_ctl", "-D", f"{work}/data", "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


def config(tmp_path, name, dsn, pa, pb, rest, program):
    p = tmp_path / f"{name}.yaml"
    p.write_text(f"""
store: {{postgres: "{dsn}"}}
ha: {{name: {name}, lease: 1.5}}
program: {program}
rest: 127.0.0.1:{rest}
grace: 0.5
reconcile_interval: 0
gateways:
  - {{name: S1, grpc: "127.0.0.1:{pa}", address: 192.0.2.1,
     lan: {{prefix: 10.1.0.0/16, port: 1, mac: "02:00:00:00:0a:01"}}, wan: {{prefix: 198.51.100.0/24, port: 2, mac: "02:00:00:00:0b:02"}}}}
  - {{name: S2, grpc: "127.0.0.1:{pb}", address: 198.51.100.1,
     lan: {{prefix: 10.2.0.0/16, port: 1, mac: "02:00:00:00:0b:01"}}, wan: {{prefix: 192.0.2.0/24, port: 2, mac: "02:00:00:00:0a:02"}}}}
tunnels:
  - {{name: S1-S2, a: S1, b: S2, suite: aes-gcm-128, auto: true, soft: {{packets: 400}}, hard: {{packets: 100000}}}}
""")
    return p


def get(rest, path, timeout=10):
    with urllib.request.urlopen(f"http://127.0.0.1:{rest}{path}", timeout=timeout) as r:
        return json.loads(r.read())


def wait_leader(rest, timeout):
    end = time.time() + timeout
    while time.time() < end:
        try:
            if get(rest, "/replica", 2)["leader"]:
                return time.time()
        except OSError:
            pass
        time.sleep(0.05)
    return None


def test_leader_lost_during_renewals(p4sec_bin, net, tmp_path, postgres):  # noqa: F811
    program = tmp_path / "gw"
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "ipsec_gateway.p4"), "-o", str(program)], check=True)
    pa, pb, r1, r2 = free_port(), free_port(), free_port(), free_port()
    slog = open(tmp_path / "switches.log", "w")
    switches = [subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{pa}", "--port", f"1={net['a1']}", "--port", f"2={net['wa']}"], stderr=slog),
                subprocess.Popen([str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{pb}", "--port", f"1={net['b1']}", "--port", f"2={net['wb']}"], stderr=slog)]
    logs = {n: open(tmp_path / f"{n}.log", "w") for n in ("r1", "r2")}
    reps = {}
    try:
        time.sleep(0.5)
        for name, rest in (("r1", r1), ("r2", r2)):
            reps[name] = subprocess.Popen([sys.executable, "-m", "p4sec.ipsec_ctl", "run", str(config(tmp_path, name, postgres, pa, pb, rest, program))],
                                          stdout=subprocess.PIPE, stderr=logs[name], text=True)
            assert "ready" in reps[name].stdout.readline(), open(tmp_path / f"{name}.log").read()[-3000:]
            if name == "r1":
                assert wait_leader(r1, 20), open(tmp_path / "r1.log").read()[-3000:]
        assert not get(r2, "/replica")["leader"]
        # the follower answers the REST API (forwarded to the leader)
        assert [t["state"] for t in get(r2, "/tunnels") if t["name"] == "S1-S2"] == ["up"]

        n, rate = 7000, 1000
        from scapy.layers.inet import IP, UDP
        from scapy.layers.l2 import Ether
        frame = bytes(Ether(dst="02:00:00:00:00:01") / IP(src="10.1.0.1", dst="10.2.0.2", ttl=64) / UDP(sport=4242, dport=4242) / (b"x" * 60))
        rx = subprocess.Popen(["ip", "netns", "exec", net["ns2"], sys.executable, "-c", STREAM, "recv", net["h2"], str(n)], stdout=subprocess.PIPE, text=True)
        assert rx.stdout.readline().strip() == "ready"
        tx = subprocess.Popen(["ip", "netns", "exec", net["ns1"], sys.executable, "-c", STREAM, "send", net["h1"], frame.hex(), str(n), str(rate)],
                              stdout=subprocess.PIPE, text=True)
        time.sleep(2.0)
        reps["r1"].send_signal(signal.SIGSTOP)      # the leader is lost (paused: it may come back)
        lost = time.time()
        led = wait_leader(r2, 10)
        assert led is not None, open(tmp_path / "r2.log").read()[-3000:]
        takeover = led - lost
        print(f"follower leads {takeover:.2f} s after the leader was lost")
        assert takeover <= 5.0, f"takeover took {takeover:.2f} s"
        time.sleep(1.0)
        reps["r1"].send_signal(signal.SIGCONT)      # the old leader resumes: it must find itself deposed
        assert reps["r1"].wait(timeout=15) == 3, "the old leader did not stop when it found itself deposed"
        assert tx.communicate(timeout=60)[0].strip() == str(n)
        got = {int(x) for x in rx.communicate(timeout=30)[0].split()}
        missing = sorted(set(range(n)) - got)
        show = get(r2, "/tunnels/S1-S2")
        events = [e["what"] for e in show["events"]]
        renewals = [e for e in events if e.startswith("renew ")]
        assert show["state"] == "up"
        assert len(renewals) >= 8, events
        assert not missing, f"{len(missing)} of {n} lost: {missing[:20]}"
        check = get(r2, "/reconcile")
        assert all(x["in_sync"] for x in check.values()), check
        assert get(r2, "/replica")["term"] >= 2, "a new term"
        log_sw = open(tmp_path / "switches.log").read()
        assert "is now the primary controller" in log_sw
    finally:
        for p in reps.values():
            try:
                p.send_signal(signal.SIGCONT)
            except ProcessLookupError:
                pass
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        for s in switches:
            s.terminate()
            s.wait(timeout=10)
