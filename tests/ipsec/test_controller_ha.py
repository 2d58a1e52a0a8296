"""A highly available controller: three replicas on a PostgreSQL store started here (the Debian package that
scripts/setup installs), two switches, a tunnel renewing its SAs continuously under traffic. The leader is killed
(SIGKILL): a follower must lead within 5 s (a new term, its election id). Then the new leader is lost without
dying (SIGSTOP: gone for the others, but alive): the third replica must lead within 5 s, and nothing the paused
leader does may land: the switches refuse a Write with its election id as not primary, the store refuses a commit
with its lease (holder, term), and when it resumes it finds itself deposed and exits. The stream loses no packet
all along, and the switches hold exactly the recorded state at the end."""
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

from ctlrig import compile_gateway, start_controller, start_switches, stop, write_config
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


def replica_config(tmp_path, name, dsn, pa, pb, rest, program, extra=""):
    """Replica `name`'s configuration: the store, a lease of 1.5 s, S1-S2 renewing every 400 packets."""
    return write_config(tmp_path / f"{name}.yaml", f'store: {{postgres: "{dsn}"}}\nha: {{name: {name}, lease: 1.5}}', pa, pb, rest, program,
                        "name: S1-S2, a: S1, b: S2, suite: aes-gcm-128, auto: true, soft: {packets: 400}, hard: {packets: 100000}",
                        extra="grace: 0.5\nreconcile_interval: 0\n" + extra)


def get(rest, path, timeout=10):
    with urllib.request.urlopen(f"http://127.0.0.1:{rest}{path}", timeout=timeout) as r:
        return json.loads(r.read())


def wait_leader(rests, timeout):
    """(name, time) of the first replica (name -> REST port) that says it leads within `timeout`, or (None, None)."""
    end = time.time() + timeout
    while time.time() < end:
        for name, rest in rests.items():
            try:
                if get(rest, "/replica", 2)["leader"]:
                    return name, time.time()
            except OSError:
                pass
        time.sleep(0.05)
    return None, None


def write_as(port, election_id):
    """An (empty) P4Runtime Write to the switch on `port` with `election_id`: "OK" or the switch's refusal."""
    import grpc
    from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        req = p4runtime_pb2.WriteRequest(device_id=1)
        req.election_id.low = election_id
        try:
            p4runtime_pb2_grpc.P4RuntimeStub(ch).Write(req, timeout=5)
            return "OK"
        except grpc.RpcError as e:
            return f"{e.code().name}: {e.details()}"


COMMIT_AS = r"""
import sys
from p4sec import ha
db = ha.PgDb(sys.argv[1], sys.argv[2], int(sys.argv[3]))
db.execute("insert or replace into kv values (?, ?)", ("fencing-probe", sys.argv[2]))
db.commit()
print("committed", flush=True)
"""


def commit_as(dsn, holder, term):
    """A commit through the controller's store with the lease (holder, term): (exit status, output, whether its row
    landed)."""
    r = subprocess.run([sys.executable, "-c", COMMIT_AS, dsn, holder, str(term)], capture_output=True, text=True, timeout=30)
    import psycopg2
    with psycopg2.connect(dsn) as c, c.cursor() as cur:
        cur.execute("select value from kv where key = 'fencing-probe'")
        landed = cur.fetchone() is not None
    return r.returncode, r.stdout + r.stderr, landed


def test_leader_killed_then_paused_during_renewals(p4sec_bin, net, tmp_path, postgres):  # noqa: F811
    program = compile_gateway(p4sec_bin, tmp_path / "gw")
    pa, pb = free_port(), free_port()
    rests = {n: free_port() for n in ("r1", "r2", "r3")}
    switches = start_switches(p4sec_bin, net, pa, pb, open(tmp_path / "switches.log", "w"))
    reps = {}
    log = lambda n: open(tmp_path / f"{n}.log").read()[-3000:]
    try:
        for name, rest in rests.items():
            reps[name] = start_controller(replica_config(tmp_path, name, postgres, pa, pb, rest, program), tmp_path / f"{name}.log")
            if name == "r1":
                assert wait_leader({"r1": rest}, 20)[0] == "r1", log("r1")
        assert not get(rests["r2"], "/replica")["leader"] and not get(rests["r3"], "/replica")["leader"]
        # a follower answers the REST API (forwarded to the leader)
        assert [t["state"] for t in get(rests["r3"], "/tunnels") if t["name"] == "S1-S2"] == ["up"]
        term1 = get(rests["r1"], "/replica")["term"]

        n, rate = 11000, 1000
        from scapy.layers.inet import IP, UDP
        from scapy.layers.l2 import Ether
        frame = bytes(Ether(dst="02:00:00:00:00:01") / IP(src="10.1.0.1", dst="10.2.0.2", ttl=64) / UDP(sport=4242, dport=4242) / (b"x" * 60))
        rx = subprocess.Popen(["ip", "netns", "exec", net["ns2"], sys.executable, "-c", STREAM, "recv", net["h2"], str(n)], stdout=subprocess.PIPE, text=True)
        assert rx.stdout.readline().strip() == "ready"
        tx = subprocess.Popen(["ip", "netns", "exec", net["ns1"], sys.executable, "-c", STREAM, "send", net["h1"], frame.hex(), str(n), str(rate)],
                              stdout=subprocess.PIPE, text=True)
        time.sleep(2.0)

        # 1. the leader killed
        reps["r1"].send_signal(signal.SIGKILL)
        killed = time.time()
        assert reps["r1"].wait(timeout=10) == -signal.SIGKILL
        second, led = wait_leader({k: rests[k] for k in ("r2", "r3")}, 10)
        assert second is not None, log("r2") + log("r3")
        print(f"{second} leads {led - killed:.2f} s after the leader was killed")
        assert led - killed <= 5.0, f"takeover took {led - killed:.2f} s"
        term2 = get(rests[second], "/replica")["term"]
        assert term2 > term1
        time.sleep(2.0)

        # 2. the new leader paused (gone for the others, but alive: it may come back)
        reps[second].send_signal(signal.SIGSTOP)
        lost = time.time()
        third_name = ({"r2", "r3"} - {second}).pop()
        third, led = wait_leader({third_name: rests[third_name]}, 10)
        assert third == third_name, log(third_name)
        print(f"{third} leads {led - lost:.2f} s after {second} was paused")
        assert led - lost <= 5.0, f"takeover took {led - lost:.2f} s"
        term3 = get(rests[third], "/replica")["term"]
        assert term3 > term2
        # no write of the paused leader can land: the switches refuse its election id, the store its lease
        for port in (pa, pb):
            assert write_as(port, term2) == "PERMISSION_DENIED: this client is not the primary controller", port
            assert write_as(port, term3) == "OK", port
        rc, out, landed = commit_as(postgres, second, term2)
        assert rc == 3 and f"{second} no longer holds the lease of term {term2}" in out and not landed, (rc, out, landed)
        rc, out, landed = commit_as(postgres, third, term3)
        assert rc == 0 and landed, (rc, out)      # the same commit with the current lease lands
        reps[second].send_signal(signal.SIGCONT)      # it resumes: it must find itself deposed and stop
        assert reps[second].wait(timeout=15) == 3, "the old leader did not stop when it found itself deposed"
        assert "deposed" in reps[second].stdout.read()

        assert tx.communicate(timeout=60)[0].strip() == str(n)
        got = {int(x) for x in rx.communicate(timeout=30)[0].split()}
        missing = sorted(set(range(n)) - got)
        show = get(rests[third], "/tunnels/S1-S2")
        events = [e["what"] for e in show["events"]]
        renewals = [e for e in events if e.startswith("renew ")]
        assert show["state"] == "up"
        assert len(renewals) >= 10, events
        assert not missing, f"{len(missing)} of {n} lost: {missing[:20]}"
        check = get(rests[third], "/reconcile")
        assert all(x["in_sync"] for x in check.values()), check
        log_sw = open(tmp_path / "switches.log").read()
        assert log_sw.count("is now the primary controller") >= 6, "each switch saw three primaries"
    finally:
        stop([*reps.values(), *switches.values()])
