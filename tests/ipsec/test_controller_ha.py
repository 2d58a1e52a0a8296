"""A highly available controller: three replicas on a PostgreSQL store started here (the Debian package that
scripts/setup installs), two switches, a tunnel renewing its SAs continuously under traffic. The leader is killed
(SIGKILL): a follower must lead within 5 s (a new term, its election id). Then the new leader is lost without
dying (SIGSTOP: gone for the others, but alive): the third replica must lead within 5 s, and nothing the paused
leader does may land: the switches refuse a Write with its election id as not primary, the store refuses a commit
with its lease (holder, term), and when it resumes it finds itself deposed and exits. The stream loses no packet
all along, and the switches hold exactly the recorded state at the end."""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from ctlrig import compile_gateway, listening, start_controller, start_switches, stop, switch, write_config
from bench import store
from p4sec.infra.netns import free_port
from test_site_to_site import net  # noqa: F401 (fixture)
from test_vpn_suites_and_renewal import STREAM

try:
    import psycopg2  # noqa: F401
    HAVE_PSYCOPG = True
except ImportError:
    HAVE_PSYCOPG = False

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
              pytest.mark.skipif(not store.pg_bin(), reason="PostgreSQL is not installed (./scripts/setup installs it)"),
              pytest.mark.skipif(not HAVE_PSYCOPG, reason="psycopg2 is not installed (./scripts/setup installs it)")]


@pytest.fixture
def postgres():
    """A PostgreSQL server of its own (unix socket only, fsync off: a test), database p4sec; its DSN."""
    with store.postgres(fsync=False) as dsn:
        yield dsn


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
from p4sec.ipsec import ha
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


SPOOF = r"""
import grpc, json, sys
ca, crt, key, sock = sys.argv[1:5]
creds = grpc.ssl_channel_credentials(open(ca, "rb").read(), open(key, "rb").read(), open(crt, "rb").read())
ch = grpc.secure_channel(f"unix:{sock}", creds, options=[("grpc.ssl_target_name_override", "controller")])
rpc = ch.unary_unary("/p4sec.Agent/Down", request_serializer=lambda o: json.dumps(o).encode(), response_deserializer=json.loads)
try:
    print(rpc({"profile": "office"}, timeout=10, metadata=(("p4sec-forwarded-client", "alice"), ("p4sec-forwarded-serial", "1"))))
except grpc.RpcError as e:
    print(e.code().name, e.details())
"""


def test_an_agent_pointed_at_a_follower(p4sec_bin, tmp_path, postgres):
    """The agents' endpoint answers on every replica: a road warrior whose agent knows only the follower gets its
    SAs (phase 1 and 2) and its renewals, the follower admitting each call (certificate, revocation, profile) and
    forwarding it to the leader without leading itself; a client cannot pose as a forwarding replica."""
    from p4sec.ipsec import ca
    from test_agent import GATEWAY_S1, PING, agent_command, echo_server, road_warrior_site
    with road_warrior_site(tmp_path) as net:
        program = compile_gateway(p4sec_bin, tmp_path / "gw")
        port = free_port()
        # the switch takes P4Runtime from the replicas' certificate (`controller`) only
        ca.issue(net["cadir"], "switch", server=True, sans=["127.0.0.1"])
        procs = [switch(p4sec_bin, port, net["a1"], net["wa"], open(tmp_path / "switch.log", "w"), pki_dir=net["cadir"])]
        listening(port)
        rests = {"r1": free_port(), "r2": free_port()}
        socks = {n: tmp_path / f"{n}.sock" for n in rests}
        log = lambda n: (tmp_path / f"{n}.log").read_text()
        try:
            for name, rest in rests.items():
                cfg = tmp_path / f"{name}.yaml"
                cfg.write_text(f'store: {{postgres: "{postgres}"}}\nha: {{name: {name}, lease: 1.5}}\nprogram: {program}\nrest: 127.0.0.1:{rest}\n'
                               + GATEWAY_S1.format(port=port, h1_mac=net["h1_mac"])
                               + f'agents: {{listen: "unix:{socks[name]}", ca: {net["cadir"]}, cert: controller}}\n'
                               + f'switch_tls: {{ca: {net["cadir"]}, cert: controller}}\n')
                procs.append(start_controller(cfg, tmp_path / f"{name}.log"))
                if name == "r1":
                    assert wait_leader({"r1": rest}, 20)[0] == "r1", log("r1")
            procs.append(echo_server(net))

            def agent(client, *args):
                return subprocess.run(agent_command(net, socks["r2"], client, *args), capture_output=True, text=True, timeout=60)
            r = agent("alice", "list")
            assert r.returncode == 0 and "alice: office" in r.stdout, r.stderr
            r = agent("bob", "up", "office", "--wan", net["rw0"])
            assert r.returncode == 1 and "PERMISSION_DENIED" in r.stderr and "may not use profile" in r.stderr
            r = agent("mallory", "list")
            assert r.returncode == 1 and "not a client" in r.stderr

            up = subprocess.Popen(agent_command(net, socks["r2"], "alice", "up", "office", "--wan", net["rw0"], "--p4sec", str(p4sec_bin)),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            procs.append(up)
            line = up.stdout.readline()
            assert line.startswith("up: office@alice inner 10.9.0.1/32 -> site 10.1.0.0/16"), line or up.stderr.read()
            # echoes until two renewals (soft limit 60 packets) went through the follower; none is lost
            renewals, state = [], {}
            for _ in range(20):
                ping = subprocess.run(["ip", "netns", "exec", net["rw"], sys.executable, "-c", PING, "10.1.0.1", "100"],
                                      capture_output=True, text=True, timeout=120)
                assert ping.stdout.strip() == "100", ping.stdout + ping.stderr
                state = get(rests["r2"], "/tunnels/office@alice")
                renewals = [e["what"] for e in state["events"] if "host renewal" in e["what"] and "SAD-enc" in e["what"]]
                if len(renewals) >= 2:
                    break
            assert state["state"] == "up" and any("host phase 2" in e["what"] for e in state["events"]), state
            assert len(renewals) >= 2, state["events"]
            # the follower forwarded, it never led: the leader did the work
            assert get(rests["r2"], "/replica") == {"name": "r2", "leader": False, "term": None}
            assert "host phase 1 for alice" in log("r1") and "host phase 1" not in log("r2")

            # a client posing as a replica (its own certificate, a forwarded call's metadata) is refused by the leader
            cadir = net["cadir"]
            r = subprocess.run([sys.executable, "-c", SPOOF, str(cadir / "ca.crt"), str(cadir / "alice.crt"), str(cadir / "alice.key"),
                                str(socks["r1"])], capture_output=True, text=True, timeout=30)
            assert r.stdout.startswith("PERMISSION_DENIED only a controller replica may forward"), r.stdout + r.stderr
            # revocation is checked on the replica the agent calls
            ca.revoke(cadir, "alice")
            r = agent("alice", "down", "office")
            assert r.returncode == 1 and "revoked" in r.stderr, r.stderr
            assert "alice: refused, its certificate" in log("r2")
            up.terminate()
            up.wait(timeout=20)
        finally:
            stop(procs)
