"""PostgreSQL or etcd for the highly available controller, measured on the controller's own operations. One run
starts a throwaway PostgreSQL (initdb in a temporary directory, unix socket only) and a throwaway etcd (one member,
data directory in a temporary directory, client and peer ports on 127.0.0.1), both durable as shipped (fsync on),
and measures, for each:

  commit      a fenced commit of one tunnel setup's rows: the lease check and the tunnel, its two SAs (with their
              keys), its sites, its intent and two events. PostgreSQL: p4sec.ha.PgDb, the controller's own store
              (one statement per row, then the commit that locks the lease row and checks holder and term).
              etcd: one transaction that compares the leader key's mod revision with the one this leader wrote
              (a deposed leader's transaction fails) and puts the seven keys.
  renew       a lease renewal. PostgreSQL: p4sec.ha.Lease.try_acquire by its holder. etcd: a lease keep-alive.
  takeover    from the lease's expiry to a follower holding it, the follower polling every eighth of the lease
              as the controller does. PostgreSQL: p4sec.ha.Lease (expiry by the store's clock). etcd: the leader
              key attached to an etcd lease; the follower creates it (a transaction on its create revision) once
              etcd has revoked the expired lease.
  read_state  the whole state of N tunnels (tunnels, two SAs each, their sites) read back, as a restarted
              leader does before it reconciles. etcd: range reads of the key prefixes, 5,000 keys per page.

etcd is spoken to through its v3 JSON gateway (POST /v3/kv/range, /v3/kv/txn, /v3/lease/grant,
/v3/lease/keepalive) with the standard library: the `etcd3` Python client is not maintained.

    python -m bench.store [--iterations 200] [--tunnels 10000] [--takeovers 5] [--lease 2] [--json FILE]
    python -m bench.store --quick        # 30 iterations, 1,000 tunnels, 2 takeovers (the test's mode)

Needs PostgreSQL's server binaries (/usr/lib/postgresql/*/bin, Debian's `postgresql`), etcd (`etcd-server`) and
psycopg2; as root, PostgreSQL runs as the `postgres` user.
"""
import argparse
import base64
import contextlib
import glob
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from p4sec.ipsec import ha
from p4sec.ipsec.ctlbase import sa_config
from p4sec.infra.netns import free_port


class BenchError(Exception):
    pass


def pg_bin():
    """The newest PostgreSQL server binaries' directory, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else None


def etcd_bin():
    return shutil.which("etcd")


@contextlib.contextmanager
def postgres(fsync=True):
    """A PostgreSQL server of its own in a temporary directory (unix socket only, trust authentication) with a
    database p4sec; its DSN. As root the server runs as the `postgres` user."""
    bin_ = pg_bin()
    if bin_ is None:
        raise BenchError("PostgreSQL's server binaries are not installed (Debian: postgresql; ./scripts/setup installs it)")
    work = tempfile.mkdtemp(prefix="p4sec-pg-")
    as_pg = []
    if os.geteuid() == 0:
        import pwd
        pw = pwd.getpwnam("postgres")
        os.chown(work, pw.pw_uid, pw.pw_gid)
        as_pg = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    opts = f"-k {work} -p {port} -c listen_addresses=''" + ("" if fsync else " -c fsync=off")

    def run(*cmd):
        r = subprocess.run(as_pg + list(cmd), capture_output=True, text=True)
        if r.returncode:
            raise BenchError(f"{os.path.basename(cmd[0])} failed: {r.stderr.strip()[-500:]}")
    try:
        run(f"{bin_}/initdb", "-D", f"{work}/data", "--auth=trust", "-U", "postgres")
        run(f"{bin_}/pg_ctl", "-D", f"{work}/data", "-l", f"{work}/log", "-w", "-o", opts, "start")
        run(f"{bin_}/createdb", "-h", work, "-p", str(port), "p4sec")
        yield f"host={work} port={port} dbname=p4sec user=postgres"
    finally:
        subprocess.run(as_pg + [f"{bin_}/pg_ctl", "-D", f"{work}/data", "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def etcd():
    """A one-member etcd in a temporary directory, client and peer ports on 127.0.0.1; its client URL."""
    exe = etcd_bin()
    if exe is None:
        raise BenchError("etcd is not installed (Debian: etcd-server; ./scripts/setup installs it)")
    work = tempfile.mkdtemp(prefix="p4sec-etcd-")
    client, peer = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    log = open(os.path.join(work, "log"), "w")
    p = subprocess.Popen([exe, "--name", "bench", "--data-dir", os.path.join(work, "data"), "--listen-client-urls", client,
                          "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                          "--initial-cluster", f"bench={peer}", "--logger", "zap", "--log-level", "error"], stdout=log, stderr=log)
    try:
        end = time.time() + 20
        while True:
            try:
                Etcd(client).post("/v3/kv/range", {"key": _b64("health")})
                break
            except (OSError, BenchError):
                if p.poll() is not None or time.time() > end:
                    raise BenchError("etcd did not start: " + open(os.path.join(work, "log")).read()[-500:]) from None
                time.sleep(0.05)
        yield client
    finally:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def _b64(s):
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


def _prefix_end(prefix):
    b = bytearray(prefix.encode())
    b[-1] += 1
    return bytes(b)


class Etcd:
    """etcd's v3 API through its JSON gateway (standard library HTTP, one keep-alive connection)."""

    def __init__(self, url):
        import http.client
        host, port = url.split("//", 1)[1].rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=30)

    def post(self, path, body):
        try:
            self.conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            r = self.conn.getresponse()
            data = r.read()
        except OSError:
            self.conn.close()
            raise
        if r.status != 200:
            raise BenchError(f"etcd {path}: HTTP {r.status}: {data[:300]!r}")
        return json.loads(data)

    def grant(self, ttl):
        r = self.post("/v3/lease/grant", {"TTL": ttl})
        return r["ID"], int(r["TTL"])

    def keepalive(self, lease_id):
        r = self.post("/v3/lease/keepalive", {"ID": lease_id})["result"]
        if int(r.get("TTL", 0)) <= 0:
            raise BenchError(f"etcd lease {lease_id} has expired")
        return int(r["TTL"])

    def txn(self, compare, success):
        return self.post("/v3/kv/txn", {"compare": compare, "success": success})

    def put_ops(self, items):
        return [{"request_put": {"key": _b64(k), "value": _b64(v)}} for k, v in items]

    def range_prefix(self, prefix, page=5000):
        """Every (key, value) under `prefix`, `page` keys per request."""
        out, key, end = [], prefix.encode(), _prefix_end(prefix)
        while True:
            r = self.post("/v3/kv/range", {"key": _b64(key), "range_end": _b64(end), "limit": page})
            kvs = r.get("kvs", [])
            out += [(base64.b64decode(kv["key"]), base64.b64decode(kv["value"])) for kv in kvs]
            if not r.get("more"):
                return out
            key = base64.b64decode(kvs[-1]["key"]) + b"\0"


LEADER_KEY = "p4sec/leader"


class EtcdLeader:
    """The controller's lease and fenced commits on etcd: the leader key attached to an etcd lease; every commit
    is a transaction that holds only while the leader key is the one this leader wrote (its mod revision)."""

    def __init__(self, url, name, ttl):
        self.kv, self.name, self.ttl = Etcd(url), name, ttl
        self.lease_id = self.revision = None

    def held(self):
        """Whether some replica holds the leader key (a cheap read: what a follower polls)."""
        return int(self.kv.post("/v3/kv/range", {"key": _b64(LEADER_KEY), "count_only": True}).get("count", 0)) > 0

    def try_acquire(self):
        """Create the leader key with a fresh etcd lease if nobody holds it; the revision (the term), or None."""
        if self.held():
            return None
        lease_id, _ = self.kv.grant(self.ttl)
        r = self.kv.txn([{"key": _b64(LEADER_KEY), "target": "CREATE", "create_revision": "0", "result": "EQUAL"}],
                        [{"request_put": {"key": _b64(LEADER_KEY), "value": _b64(self.name), "lease": lease_id}}])
        if not r.get("succeeded"):
            self.kv.post("/v3/lease/revoke", {"ID": lease_id})
            return None
        self.lease_id, self.revision = lease_id, int(r["header"]["revision"])
        return self.revision

    def renew(self):
        return self.kv.keepalive(self.lease_id)

    def commit(self, items):
        """Put `items` ((key, value) pairs) if this replica still leads; whether it did."""
        r = self.kv.txn([{"key": _b64(LEADER_KEY), "target": "MOD", "mod_revision": str(self.revision), "result": "EQUAL"}],
                        self.kv.put_ops(items))
        return bool(r.get("succeeded"))


def tunnel_rows(i):
    """One tunnel setup's rows as the controller records them: tunnel, two SAs (keys included), sites, intent,
    events."""
    name = f"t{i}"
    now = time.time()
    sas = []
    for k, (src, dst) in enumerate((("S1", "S2"), ("S2", "S1"))):
        spi = 0x1000 + 2 * i + k
        cfg = sa_config(spi, "aes-gcm-128", os.urandom(20), b"", "192.0.2.1", "198.51.100.1", {"packets": 1000000}, {"packets": 2000000})
        sas.append((spi, name, src, dst, i, i, json.dumps(cfg), now, "active"))
    return {"tunnel": (name, "S1", "S2", "aes-gcm-128", '{"packets": 1000000}', '{"packets": 2000000}', now, "up"),
            "sas": sas, "sites": (f"sites:{name}", json.dumps({"S1": f"10.1.{i % 256}.0/24", "S2": f"10.2.{i % 256}.0/24"})),
            "intent": ("setup", name, json.dumps({"fresh": [s[0] for s in sas]}), now),
            "events": [(now, name, f"setup {name}: SAD-dec on both"), (now, name, f"up {name}")]}


def etcd_items(rows):
    t = rows["tunnel"]
    items = [(f"tunnel/{t[0]}", json.dumps(t))]
    items += [(f"sa/{s[0]:010d}", json.dumps(s)) for s in rows["sas"]]
    items.append((f"kv/{rows['sites'][0]}", rows["sites"][1]))
    items.append((f"intent/{t[0]}", json.dumps(rows["intent"])))
    items += [(f"event/{t[0]}/{k}", json.dumps(e)) for k, e in enumerate(rows["events"])]
    return items


def pg_record(db, rows):
    """The statements the controller runs for one tunnel setup (p4sec.controller), then its fenced commit."""
    db.execute("insert or replace into tunnel values (?, ?, ?, ?, ?, ?, ?, ?)", rows["tunnel"])
    for s in rows["sas"]:
        db.execute("insert into sa values (?, ?, ?, ?, ?, ?, ?, ?, ?)", s)
    db.execute("insert or replace into kv values (?, ?)", rows["sites"])
    db.execute("insert into intent (op, tunnel, data, t) values (?, ?, ?, ?)", rows["intent"])
    for e in rows["events"]:
        db.execute("insert into event values (?, ?, ?)", e)
    db.commit()


def median_ms(samples):
    return round(1000 * statistics.median(samples), 3)


def timed(fn, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def bench_postgres(dsn, iterations, tunnels, takeovers, lease_s):
    import psycopg2
    import psycopg2.extras
    res = {}
    lease = ha.Lease(dsn, "bench", seconds=3600)
    term = lease.try_acquire()
    db = ha.PgDb(dsn, "bench", term)
    i = iter(range(10 ** 9))
    res["commit_ms"] = median_ms(timed(lambda: pg_record(db, tunnel_rows(next(i))), iterations))
    res["renew_ms"] = median_ms(timed(lease.try_acquire, iterations))
    # takeover: two replicas' leases, one stops renewing, the other polls as run_replica does
    leases = [ha.Lease(dsn, "a", seconds=lease_s), ha.Lease(dsn, "b", seconds=lease_s)]
    with lease.conn.cursor() as c:
        c.execute("update lease set expires = 0 where id = 1")
    lease.conn.commit()
    leases[0].try_acquire()
    samples = []
    for k in range(takeovers):
        holder, follower = leases[k % 2], leases[(k + 1) % 2]
        with holder.conn.cursor() as c:
            c.execute("select expires from lease where id = 1")
            expires = c.fetchone()[0]
        holder.conn.commit()
        term = follower.wait(threading.Event())
        samples.append(time.time() - expires)
        assert term is not None
    res["takeover_ms"] = median_ms(samples)
    # the whole state of `tunnels` tunnels
    conn = psycopg2.connect(dsn)
    with conn, conn.cursor() as c:
        c.execute("delete from tunnel; delete from sa; delete from kv; delete from event; delete from intent")
        batch = [tunnel_rows(n) for n in range(tunnels)]
        psycopg2.extras.execute_values(c, "insert into tunnel values %s", [b["tunnel"] for b in batch])
        psycopg2.extras.execute_values(c, "insert into sa values %s", [s for b in batch for s in b["sas"]])
        psycopg2.extras.execute_values(c, "insert into kv values %s", [b["sites"] for b in batch])
    conn.close()
    reader = ha.PgDb(dsn)

    def read():
        n = len(reader.execute("select * from tunnel").fetchall())
        n += len(reader.execute("select * from sa").fetchall())
        n += len(reader.execute("select * from kv").fetchall())
        if n != 4 * tunnels:
            raise BenchError(f"PostgreSQL read {n} rows of {4 * tunnels}")
    res["read_state_ms"] = median_ms(timed(read, 5 if tunnels >= 5000 else 3))
    res["version"] = db.execute("select version()").fetchone()[0].split(" on ")[0]
    for x in (db, reader):
        x.close()
    return res


def bench_etcd(url, iterations, tunnels, takeovers, lease_s):
    res = {}
    ttl = max(1, round(lease_s))
    me = EtcdLeader(url, "bench", 3600)
    if me.try_acquire() is None:
        raise BenchError("etcd: the leader key is taken in a fresh etcd")
    i = iter(range(10 ** 9))

    def commit():
        if not me.commit(etcd_items(tunnel_rows(next(i)))):
            raise BenchError("etcd: a fenced commit of the leader failed")
    res["commit_ms"] = median_ms(timed(commit, iterations))
    res["renew_ms"] = median_ms(timed(me.renew, iterations))
    # a deposed leader's commit fails: the key is rewritten by another leader
    me.kv.post("/v3/kv/deleterange", {"key": _b64(LEADER_KEY)})
    other = EtcdLeader(url, "other", ttl)
    other.try_acquire()
    if me.commit([("fencing-probe", "x")]):
        raise BenchError("etcd: a deposed leader's commit landed")
    samples = []
    leaders = [other, EtcdLeader(url, "b", ttl)]
    for k in range(takeovers):
        holder, follower = leaders[k % 2], leaders[(k + 1) % 2]
        t_ttl = holder.renew()            # the holder's last renewal: the lease ends t_ttl seconds later
        expires = time.time() + t_ttl
        while follower.try_acquire() is None:
            time.sleep(lease_s / 8)
        samples.append(time.time() - expires)
    res["takeover_ms"] = median_ms(samples)
    res["lease_ttl_s"] = ttl
    # the whole state of `tunnels` tunnels
    kv = Etcd(url)
    for p in ("tunnel/", "sa/", "kv/", "event/", "intent/"):
        kv.post("/v3/kv/deleterange", {"key": _b64(p), "range_end": _b64(_prefix_end(p))})
    items = []
    for n in range(tunnels):
        items += [x for x in etcd_items(tunnel_rows(n)) if x[0].split("/")[0] in ("tunnel", "sa", "kv")]
    for k in range(0, len(items), 120):
        kv.txn([], kv.put_ops(items[k:k + 120]))

    def read():
        n = sum(len(kv.range_prefix(p)) for p in ("tunnel/", "sa/", "kv/"))
        if n != 4 * tunnels:
            raise BenchError(f"etcd read {n} keys of {4 * tunnels}")
    res["read_state_ms"] = median_ms(timed(read, 5 if tunnels >= 5000 else 3))
    with urllib.request.urlopen(url + "/version", timeout=10) as r:
        res["version"] = "etcd " + json.loads(r.read())["etcdserver"]
    return res


def machine():
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version()}


def run(iterations, tunnels, takeovers, lease_s):
    with postgres() as dsn:
        pg = bench_postgres(dsn, iterations, tunnels, takeovers, lease_s)
    with etcd() as url:
        et = bench_etcd(url, iterations, tunnels, takeovers, lease_s)
    ops = ("commit_ms", "renew_ms", "takeover_ms", "read_state_ms")
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
            "params": {"iterations": iterations, "tunnels": tunnels, "takeovers": takeovers, "lease_s": lease_s},
            "postgres": pg, "etcd": et, "etcd_over_postgres": {k: round(et[k] / pg[k], 2) for k in ops}}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.store", description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=200, help="commits and renewals timed per store")
    ap.add_argument("--tunnels", type=int, default=10000, help="tunnels in the state read back")
    ap.add_argument("--takeovers", type=int, default=5)
    ap.add_argument("--lease", type=float, default=2.0, help="lease in seconds (etcd: rounded to whole seconds)")
    ap.add_argument("--quick", action="store_true", help="30 iterations, 1,000 tunnels, 2 takeovers")
    ap.add_argument("--json", help="write the figures to this file")
    a = ap.parse_args(argv)
    if a.quick:
        a.iterations, a.tunnels, a.takeovers = 30, 1000, 2
    for k in ("iterations", "tunnels", "takeovers"):
        if getattr(a, k) < 1:
            ap.error(f"--{k} must be at least 1")
    if a.lease < 1:
        ap.error("--lease must be at least 1 second (etcd's leases are whole seconds)")
    try:
        out = run(a.iterations, a.tunnels, a.takeovers, a.lease)
    except BenchError as e:
        print(f"bench.store: {e}", file=sys.stderr)
        return 1
    print(f"{'operation':<12} {'PostgreSQL ms':>14} {'etcd ms':>10} {'etcd/PG':>8}")
    for k, label in (("commit_ms", "commit"), ("renew_ms", "renew"), ("takeover_ms", "takeover"), ("read_state_ms", "read state")):
        print(f"{label:<12} {out['postgres'][k]:>14.3f} {out['etcd'][k]:>10.3f} {out['etcd_over_postgres'][k]:>8.2f}")
    print(f"({out['postgres']['version']}, {out['etcd']['version']}; {a.tunnels} tunnels; {out['machine']['cpu']}, {out['machine']['cores']} cores)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
