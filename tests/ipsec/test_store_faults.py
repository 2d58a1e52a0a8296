"""The controller's store fails under traffic that renews its SAs continuously with a short hard limit (issue 36):
the one controller's SQLite store on a full disk; the highly available controller's PostgreSQL store with the
leader's data connection killed, read-only, and unreachable when the replicas start. In each, no packet is lost
(counted one by one), the tunnel is reported degraded while its renewals fail (REST, /health, /metrics), the
renewals resume once the store is back, no SA stays `retiring`, and the switches hold exactly the recorded state
at the end."""
import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from bench import pgha, store
from ctlrig import compile_gateway, start_controller, start_switches, stop, write_config
from p4sec.infra.netns import free_port
from test_site_to_site import net  # noqa: F401 (fixture)
from test_vpn_suites_and_renewal import STREAM as _STREAM

# the renewal test's stream, its receiver with a 16 MB socket buffer: a receiver descheduled for a moment (the
# faults here start processes) must not drop what the data plane delivered
STREAM = _STREAM.replace("s.bind((iface, 0))", "s.bind((iface, 0))\ns.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE")
assert STREAM != _STREAM

try:
    import psycopg2
except ImportError:
    psycopg2 = None

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces and mounts")
needs_pg = [pytest.mark.skipif(not store.pg_bin(), reason="PostgreSQL is not installed (./scripts/setup installs it)"),
            pytest.mark.skipif(psycopg2 is None, reason="psycopg2 is not installed (./scripts/setup installs it)")]
pytestmark = [root_only]


def pg_only(f):
    for m in needs_pg:
        f = m(f)
    return f

RATE = 1000
# a renewal every 0.4 s of traffic; the hard limit 8 s of traffic away: the store is away for 3 s of it
SOFT, HARD = 400, 8000


def get(rest, path, timeout=10):
    """(status, body) of GET path (JSON, or text for /metrics)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{rest}{path}", timeout=timeout) as r:
            code, body = r.status, r.read()
    except urllib.error.HTTPError as e:
        code, body = e.code, e.read()
    return code, (body.decode() if path == "/metrics" else json.loads(body))


@contextlib.contextmanager
def stream(net, n):  # noqa: F811
    """n numbered frames from S1's host to S2's at RATE; yields a dict that gets "missing" (sorted) at the end."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    frame = bytes(Ether(dst="02:00:00:00:00:01") / IP(src="10.1.0.1", dst="10.2.0.2", ttl=64) / UDP(sport=4242, dport=4242) / (b"x" * 60))
    rx = subprocess.Popen(["ip", "netns", "exec", net["ns2"], sys.executable, "-c", STREAM, "recv", net["h2"], str(n)], stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == "ready"
    tx = subprocess.Popen(["ip", "netns", "exec", net["ns1"], sys.executable, "-c", STREAM, "send", net["h1"], frame.hex(), str(n), str(RATE)],
                          stdout=subprocess.PIPE, text=True)
    out = {}
    try:
        yield out
        assert tx.communicate(timeout=120)[0].strip() == str(n)
        got = {int(x) for x in rx.communicate(timeout=60)[0].split()}
        out["missing"] = sorted(set(range(n)) - got)
    finally:
        stop([tx, rx])


def renewal_times(show):
    return [e["t"] for e in show["events"] if e["what"].startswith("renew ") and "SAD-enc" in e["what"]]


def wait_for(fn, timeout, step=0.1):
    """fn()'s first true value within timeout (else its last value)."""
    end = time.time() + timeout
    while True:
        v = fn()
        if v or time.time() > end:
            return v
        time.sleep(step)


def settled(rest, grace):
    """After the traffic: the tunnel up and in sync with the store, no SA left `retiring`."""
    time.sleep(grace + 1.5)
    code, show = get(rest, "/tunnels/S1-S2")
    assert code == 200 and show["state"] == "up", show
    states = {s["state"] for s in show["sas"]}
    assert states <= {"active", "deleted"}, show["sas"]
    assert len([s for s in show["sas"] if s["state"] == "active"]) == 2, show["sas"]
    code, check = get(rest, "/reconcile")
    assert code == 200 and all(x["in_sync"] for x in check.values()), check
    code, health = get(rest, "/health")
    assert code == 200 and health["ok"] and health["renewals_pending"] == 0, health
    return show


@pytest.fixture(scope="module")
def program(p4sec_bin, tmp_path_factory):
    return compile_gateway(p4sec_bin, tmp_path_factory.mktemp("gw"))


@contextlib.contextmanager
def small_disk(path, size="16m"):
    """A tmpfs of `size` mounted at path."""
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(path):
    """Fill the file system of `path` (a file `fill` in it) until it is full."""
    with open(path / "fill", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass


def test_sqlite_store_disk_full_loses_no_packet(p4sec_bin, net, tmp_path, program):  # noqa: F811
    pa, pb, rest = free_port(), free_port(), free_port()
    switches = start_switches(p4sec_bin, net, pa, pb, open(tmp_path / "switches.log", "w"))
    ctl = None
    with small_disk(tmp_path / "disk") as disk:
        try:
            token = "t0ken-" + "x" * 24
            (tmp_path / "status.token").write_text(token + "\n")
            cfg = write_config(tmp_path / "ctl.yaml", f"db: {disk / 'ctl.db'}", pa, pb, rest, program,
                               f"name: S1-S2, a: S1, b: S2, auto: true, soft: {{packets: {SOFT}}}, hard: {{packets: {HARD}}}",
                               extra=f"grace: 0.3\nreconcile_interval: 0\nstatus: {{token_file: {tmp_path / 'status.token'}}}")
            ctl = start_controller(cfg, tmp_path / "ctl.log")
            n = 12000
            with stream(net, n) as result:
                time.sleep(2.0)
                fill(disk)
                full = time.time()
                # the renewals fail: the tunnel says so (REST, health, metrics) instead of "up"
                degraded = wait_for(lambda: (lambda s: s if s["state"] == "degraded" else None)(get(rest, "/tunnels/S1-S2")[1]), 2.5)
                code, health = get(rest, "/health")
                req = urllib.request.Request(f"http://127.0.0.1:{rest}/metrics", headers={"Authorization": f"Bearer {token}"})
                with urllib.request.urlopen(req, timeout=10) as r:
                    metrics = r.read().decode()     # (the status page's metrics)
                time.sleep(max(0.0, full + 3.0 - time.time()))
                os.unlink(disk / "fill")
                freed = time.time()
            assert degraded, "the tunnel was never reported degraded while the disk was full"
            assert any("store" in w or "renewal of SA" in w for w in degraded["degraded_by"]), degraded["degraded_by"]
            assert code == 503 and not health["ok"] and "full" in health["store"], health
            assert 'p4sec_controller_store_up{replica="controller"} 0' in metrics, metrics
            assert 'p4sec_controller_tunnel_state{tunnel="S1-S2",state="degraded"} 1' in metrics, metrics
            assert not result["missing"], f"{len(result['missing'])} of {n} lost: {result['missing'][:20]}"
            show = settled(rest, 0.3)
            times = renewal_times(show)
            assert [t for t in times if t < full], "renewals before the disk was full"
            after = [t for t in times if t > freed]
            assert len(after) >= 4, f"renewals did not resume after the disk was freed: {times}"
            print(f"first renewal {after[0] - freed:.2f} s after the disk was freed")
            log = (tmp_path / "ctl.log").read_text()
            assert "renewal of SA" in log and "landed after" in log, log[-3000:]
            assert "Traceback" not in log, log[-3000:]
            stop([ctl])
            # the store is whole: integrity intact, no operation left half-recorded, no SA left retiring
            db = sqlite3.connect(disk / "ctl.db")
            assert db.execute("pragma integrity_check").fetchone()[0] == "ok"
            assert db.execute("select count(*) from intent").fetchone()[0] == 0
            assert db.execute("select count(*) from sa where state = 'retiring'").fetchone()[0] == 0
            db.close()
        finally:
            stop([ctl, *switches.values()])


# ---------------------------------------------------------------------------------------------------- PostgreSQL

def pg_ctl(dsn, action):
    """Stop (immediately: as if the server died) or start again the PostgreSQL server of bench.store.postgres()
    whose DSN is `dsn` (same directory, same port)."""
    work, port = re.search(r"host=(\S+) port=(\d+)", dsn).groups()
    as_pg = ["runuser", "-u", "postgres", "--"]
    cmd = [f"{store.pg_bin()}/pg_ctl", "-D", f"{work}/data", "-l", f"{work}/log", "-w"]
    if action == "stop":
        cmd += ["-m", "immediate", "stop"]
    else:
        cmd += ["-o", f"-k {work} -p {port} -c listen_addresses='' -c fsync=off", "start"]
    subprocess.run(as_pg + cmd, check=True, capture_output=True, timeout=60)


def sql(dsn, *statements):
    """Statements run one by one outside a transaction (ALTER SYSTEM needs that); the last one's rows."""
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        with conn.cursor() as c:
            for s in statements:
                c.execute(s)
            return c.fetchall() if c.description else None
    finally:
        conn.close()


@pytest.fixture
def postgres():
    with store.postgres(fsync=False) as dsn:
        yield dsn


@contextlib.contextmanager
def replicas(p4sec_bin, net, tmp_path, program, dsn, names=("r1", "r2"), wait_ready=True, hard=HARD):  # noqa: F811
    """The two switches and replicas `names` of a controller on `dsn` (lease 1.5 s, S1-S2 with SOFT and `hard`);
    yields {"rests": name -> REST port, "procs": name -> process, "log": name -> its log's text}."""
    pa, pb = free_port(), free_port()
    switches = start_switches(p4sec_bin, net, pa, pb, open(tmp_path / "switches.log", "w"))
    rig = {"rests": {n: free_port() for n in names}, "procs": {}, "log": lambda n: (tmp_path / f"{n}.log").read_text()}
    try:
        for n in names:
            cfg = write_config(tmp_path / f"{n}.yaml", f'store: {{postgres: "{dsn}"}}\nha: {{name: {n}, lease: 1.5}}', pa, pb, rig["rests"][n],
                               program, f"name: S1-S2, a: S1, b: S2, auto: true, soft: {{packets: {SOFT}}}, hard: {{packets: {hard}}}",
                               extra="grace: 0.3\nreconcile_interval: 0")
            rig["procs"][n] = start_controller(cfg, tmp_path / f"{n}.log")
            if wait_ready and n == names[0]:
                assert leader(rig, 20), rig["log"](n)
        yield rig
    finally:
        stop([*rig["procs"].values(), *switches.values()])


def leader(rig, timeout):
    """The REST port of the replica that leads (within timeout), or None."""
    def find():
        for n, rest in rig["rests"].items():
            try:
                if get(rest, "/replica", 2)[1]["leader"]:
                    return rest
            except OSError:
                pass
        return None
    return wait_for(find, timeout)


def final_checks(rig, result, n, fault_at, back_at):
    assert not result["missing"], f"{len(result['missing'])} of {n} lost: {result['missing'][:20]}"
    rest = leader(rig, 10)
    assert rest, "no replica leads at the end"
    show = settled(rest, 0.3)
    times = renewal_times(show)
    assert [t for t in times if t < fault_at], f"no renewal before the fault: {times}"
    after = [t for t in times if t > back_at]
    assert len(after) >= 4, f"renewals did not resume after the store came back: {times}"
    print(f"first renewal {after[0] - back_at:.2f} s after the store came back")
    for name, p in rig["procs"].items():
        assert p.poll() is None, f"replica {name} exited ({p.returncode}): {rig['log'](name)[-2000:]}"
        assert "Traceback" not in rig["log"](name), rig["log"](name)[-3000:]
    rows = sql(rig["dsn"], "select count(*) from sa where state = 'retiring'")
    assert rows == [(0,)], rows


@pg_only
def test_leader_data_connection_killed(p4sec_bin, net, tmp_path, program, postgres):  # noqa: F811
    """The leader's data connection killed three times (pg_terminate_backend; its lease connection untouched): it
    connects again (or a follower takes over), the renewals go on, nothing is lost."""
    with replicas(p4sec_bin, net, tmp_path, program, postgres) as rig:
        rig["dsn"] = postgres
        n = 9000
        with stream(net, n) as result:
            time.sleep(2.0)
            fault_at = time.time()
            killed = []
            for _ in range(3):
                rows = sql(postgres, "select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'p4sec-data-r1'")
                killed.append(len(rows))
                time.sleep(1.0)
            back_at = time.time()
        assert killed[0] == 1, killed
        final_checks(rig, result, n, fault_at, back_at)


@pg_only
@pytest.mark.parametrize("fault", ["read-only", "down"])
def test_store_read_only_or_down_for_3s(p4sec_bin, net, tmp_path, program, postgres, fault):  # noqa: F811
    """PostgreSQL read-only (default_transaction_read_only) or stopped for 3 s under traffic: the leader reports
    the tunnel degraded, cannot renew its lease on its data connection and steps down within the lease; once the
    store is back a replica leads again, renews what reached its soft limit meanwhile, and nothing is lost."""
    with replicas(p4sec_bin, net, tmp_path, program, postgres) as rig:
        rig["dsn"] = postgres
        first = leader(rig, 5)
        n = 11000
        with stream(net, n) as result:
            time.sleep(2.0)
            fault_at = time.time()
            if fault == "read-only":
                sql(postgres, "alter system set default_transaction_read_only = on", "select pg_reload_conf()")
            else:
                pg_ctl(postgres, "stop")
            degraded = wait_for(lambda: (lambda r: r if r[1].get("state") == "degraded" else None)(get(first, "/tunnels/S1-S2", 2)), 1.2)
            code, health = get(first, "/health", 2)
            time.sleep(max(0.0, fault_at + 3.0 - time.time()))
            if fault == "read-only":
                sql(postgres, "alter system reset default_transaction_read_only", "select pg_reload_conf()")
            else:
                pg_ctl(postgres, "start")
            back_at = time.time()
            new = leader(rig, 10)
            led_at = time.time()
        assert degraded, "the leader never reported the tunnel degraded"
        assert code == 503 and not health["ok"], health
        logs = "".join(rig["log"](name) for name in rig["rests"])
        assert "steps down: lease not renewed" in logs, logs[-3000:]
        assert new, "no replica leads after the store came back"
        print(f"{fault}: a replica leads {led_at - back_at:.2f} s after the store came back")
        final_checks(rig, result, n, fault_at, back_at)


@pg_only
def test_store_unreachable_at_start_up(p4sec_bin, net, tmp_path, program, postgres):  # noqa: F811
    """Replicas started while PostgreSQL is down stay up, answer /health (503, naming the store) and /replica, and
    one leads once the store is up; the tunnel then carries traffic without loss."""
    pg_ctl(postgres, "stop")
    with replicas(p4sec_bin, net, tmp_path, program, postgres, wait_ready=False) as rig:
        time.sleep(2.0)
        for name, rest in rig["rests"].items():
            assert rig["procs"][name].poll() is None, rig["log"](name)
            code, health = get(rest, "/health")
            assert code == 503 and not health["ok"] and "unreachable" in health["store"], health
            assert get(rest, "/replica")[1] == {"name": name, "leader": False, "term": None}
        pg_ctl(postgres, "start")
        back = time.time()
        rest = leader(rig, 15)
        assert rest, rig["log"]("r1") + rig["log"]("r2")
        print(f"a replica leads {time.time() - back:.2f} s after the store started")
        assert wait_for(lambda: get(rest, "/tunnels/S1-S2")[1].get("state") == "up", 10)
        n = 2000
        with stream(net, n) as result:
            pass
        assert not result["missing"], f"{len(result['missing'])} of {n} lost"
        for name in rig["rests"]:
            assert "Traceback" not in rig["log"](name), rig["log"](name)[-3000:]


@pytest.mark.skipif(not pgha.available(), reason="pg_auto_failover is not installed (./scripts/setup installs it)")
@pg_only
def test_store_primary_killed(p4sec_bin, net, tmp_path, program):  # noqa: F811
    """The store replicated (PostgreSQL with a synchronous standby, pg_auto_failover): its primary node killed under
    renewals. The monitor promotes the standby; the leader, which cannot renew its lease meanwhile, steps down and
    leads again on the new primary (or the other replica does); no committed SA is lost, no packet either (a hard
    limit of 15 s of traffic)."""
    with pgha.cluster() as c:
        with replicas(p4sec_bin, net, tmp_path, program, c.dsn, hard=15000) as rig:
            rig["dsn"] = c.dsn
            first = leader(rig, 5)
            n = 15000
            with stream(net, n) as result:
                time.sleep(3.0)
                committed = {s["spi"] for s in get(first, "/sas")[1]}
                fault_at = time.time()
                killed = c.kill_primary()
                writable = wait_for(lambda: _writable(c), 30, 0.05)
                back_at = time.time()
                new = leader(rig, 15)
                led_at = time.time()
            assert writable, "the standby was not promoted"
            assert new, "no replica leads after the failover"
            print(f"store primary {killed} killed: commits land {back_at - fault_at:.2f} s later on {c.primary()}, "
                  f"a replica leads {led_at - fault_at:.2f} s after the kill")
            after = {s["spi"] for s in get(new, "/sas")[1]}
            assert committed <= after, f"committed SAs lost in the failover: {sorted(committed - after)}"
            final_checks(rig, result, n, fault_at, back_at)


def _writable(c):
    try:
        return c.writable()
    except Exception:
        return False
