"""A replicated controller store on this machine: PostgreSQL with a synchronous standby and automatic failover by
pg_auto_failover (Debian's `postgresql-NN-auto-failover` and `pg-auto-failover-cli`): a monitor and two data
nodes, all on 127.0.0.1 with ports of their own, trust authentication, no TLS (a test's cluster). The primary
commits only once the standby has the commit (synchronous_standby_names ANY 1); when the primary node dies the
monitor promotes the standby. The controller reaches whichever node is primary through one libpq DSN naming both
(target_session_attrs=read-write).

The monitor's health checks are tightened from their defaults (5 s period, a node unhealthy after 20 s, 30 s for
an old primary to demote) to a 1 s period, 2 s and 2 s, so a takeover takes seconds: safe with a synchronous
standby, as an old primary cut off from it cannot commit anything.

    with cluster() as c:        # c.dsn; c.kill_primary() -> the killed node's name; c.primary() -> its name
        ...
    python -m bench.pgha        # start a cluster, kill its primary, print the takeover time (writes blocked)

As root the nodes run as the `postgres` user."""
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from p4sec.infra.netns import free_port


class ClusterError(Exception):
    pass


def available():
    """Whether pg_auto_failover and PostgreSQL's server binaries are installed."""
    from bench.store import pg_bin
    return shutil.which("pg_autoctl") is not None and pg_bin() is not None


class Cluster:
    """A running pg_auto_failover formation (see the module's description)."""

    def __init__(self, work):
        from bench.store import pg_bin
        self.work = work
        self.bin = pg_bin()
        self.ports = {"monitor": free_port(), "n1": free_port(), "n2": free_port()}
        self.procs = {}
        self.as_pg = []
        if os.geteuid() == 0:
            import pwd
            pw = pwd.getpwnam("postgres")
            os.chown(work, pw.pw_uid, pw.pw_gid)
            self.as_pg = ["runuser", "-u", "postgres", "--"]
        self.env = ["env", f"PATH={self.bin}:/usr/bin:/bin", f"XDG_CONFIG_HOME={work}/cfg", f"XDG_DATA_HOME={work}/data",
                    f"XDG_RUNTIME_DIR={work}/run", "PG_AUTOCTL_DEBUG=0"]
        self.monitor_uri = f"postgres://autoctl_node@127.0.0.1:{self.ports['monitor']}/pg_auto_failover?sslmode=disable"
        self.dsn = (f"host=127.0.0.1,127.0.0.1 port={self.ports['n1']},{self.ports['n2']} dbname=p4sec user=postgres "
                    "target_session_attrs=read-write connect_timeout=2")

    def _spawn(self, name, *args):
        log = open(os.path.join(self.work, f"{name}.log"), "a")
        self.procs[name] = subprocess.Popen(self.as_pg + self.env + ["pg_autoctl", *args], stdout=log, stderr=log, start_new_session=True)

    def _sql(self, port, db, query, args=()):
        import psycopg2
        conn = psycopg2.connect(host="127.0.0.1", port=port, dbname=db, user="postgres", connect_timeout=2)
        conn.autocommit = True
        try:
            with conn.cursor() as c:
                c.execute(query, args)
                return c.fetchall() if c.description else None
        finally:
            conn.close()

    def _wait(self, what, fn, timeout):
        end = time.time() + timeout
        while True:
            try:
                if fn():
                    return
            except Exception:
                pass
            if time.time() > end:
                logs = "".join(open(os.path.join(self.work, f)).read()[-800:] for f in sorted(os.listdir(self.work)) if f.endswith(".log"))
                raise ClusterError(f"pg_auto_failover: {what} did not happen within {timeout} s; logs: {logs}")
            time.sleep(0.2)

    def states(self):
        """{node name: (reported state, assigned state)} from the monitor."""
        rows = self._sql(self.ports["monitor"], "pg_auto_failover", "select nodename, reportedstate, goalstate from pgautofailover.node")
        return {n: (r, g) for n, r, g in rows}

    def start(self):
        mon = os.path.join(self.work, "monitor")
        self._spawn("monitor", "create", "monitor", "--pgdata", mon, "--pgport", str(self.ports["monitor"]), "--hostname", "127.0.0.1",
                    "--listen", "127.0.0.1", "--auth", "trust", "--no-ssl", "--run")
        self._wait("the monitor's start", lambda: self._sql(self.ports["monitor"], "pg_auto_failover", "select 1"), 60)
        for k, v in (("health_check_period", 1000), ("health_check_timeout", 1000), ("health_check_max_retries", 1),
                     ("health_check_retry_delay", 500), ("node_considered_unhealthy_timeout", 2000), ("primary_demote_timeout", 2000)):
            self._sql(self.ports["monitor"], "pg_auto_failover", f"alter system set pgautofailover.{k} = {v}")
        self._sql(self.ports["monitor"], "pg_auto_failover", "select pg_reload_conf()")
        for name, state in (("n1", "single"), ("n2", "secondary")):
            self._spawn(name, "create", "postgres", "--pgdata", os.path.join(self.work, name), "--pgport", str(self.ports[name]),
                        "--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--auth", "trust", "--no-ssl", "--ssl-mode", "disable",
                        "--monitor", self.monitor_uri, "--dbname", "p4sec", "--name", name, "--run")
            # the standby's base backup waits for a checkpoint on the primary: ask for it at once, not spread
            self._wait(f"{name} {state}", lambda name=name, state=state: (name == "n1" or self._sql(self.ports["n1"], "p4sec", "checkpoint") or True)
                       and self.states().get(name) == (state, state), 90)
        self._wait("the primary with its synchronous standby", lambda: self.states().get("n1") == ("primary", "primary")
                   and self._sql(self.ports["n1"], "p4sec", "show synchronous_standby_names")[0][0] != "", 30)
        return self

    def primary(self):
        """The node the monitor has made primary (reported and assigned), or None."""
        return next((n for n, (r, g) in self.states().items() if r == g and r in ("primary", "wait_primary", "single")), None)

    def kill_primary(self):
        """SIGKILL the primary node: its keeper and its PostgreSQL, at once (a machine lost). Its name."""
        name = self.primary()
        if name is None:
            raise ClusterError("no primary to kill")
        self._kill(name)
        return name

    def _kill(self, name):
        p = self.procs.get(name)
        if p is not None and p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
        # PostgreSQL's processes of this node (started by its keeper, in its process group or not): by the data
        # directory in their command line, or as children of its postmaster
        pgdata = os.path.join(self.work, name)
        for pid in _pids_with(pgdata):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if p is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)

    def writable(self):
        """Whether a commit lands now through the controller's DSN."""
        import psycopg2
        conn = psycopg2.connect(self.dsn, options="-c statement_timeout=1000")
        try:
            with conn.cursor() as c:
                c.execute("create table if not exists pgha_probe (t double precision)")
                c.execute("insert into pgha_probe values (%s)", (time.time(),))
            conn.commit()
            return True
        finally:
            conn.close()

    def stop(self):
        for name in ("n2", "n1", "monitor"):
            self._kill(name)


def _pids_with(text):
    """The processes whose command line contains `text` (this cluster's data directories are unique)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if text.encode() in f.read():
                        out.append(int(d))
            except OSError:
                pass
    return out


@contextlib.contextmanager
def cluster():
    """A started Cluster in a temporary directory, stopped and removed at the end."""
    work = tempfile.mkdtemp(prefix="p4sec-pgha-")
    c = Cluster(work)
    try:
        yield c.start()
    finally:
        c.stop()
        shutil.rmtree(work, ignore_errors=True)


def main():
    if not available():
        sys.exit("bench.pgha: pg_auto_failover is not installed (Debian: postgresql-NN-auto-failover, pg-auto-failover-cli)")
    with cluster() as c:
        c.writable()
        killed = c.kill_primary()
        t0 = time.time()
        c._wait("a commit after the failover", c.writable, 60)
        print(f"killed {killed}; commits land again {time.time() - t0:.2f} s later on {c.primary()}")


if __name__ == "__main__":
    main()
