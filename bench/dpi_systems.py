"""URL filtering benchmark (`python -m bench.dpi`): the systems under test (netfilter, the p4sec fast
filter, the recirculating DeeP4R filter) and the p4sec switch with its control client."""
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from p4sec import dpi
from p4sec.infra.netns import in_netns, ns
from bench.dpi_common import ROOT, BenchError


CONTROL = r"""
import itertools, json, pathlib, sys, time
from p4.v1 import p4runtime_pb2
from p4sec import dpi
from p4sec.infra.runtime import Switch

sw = Switch(sys.argv[1])

def insert_many(table, action, rows, batch=16384):
    # rows: (exact key values as ints, action parameters as ints), sent in Writes of `batch` updates
    t = next(x for x in sw.p4info.tables if x.preamble.name == table)
    a = next(x for x in sw.p4info.actions if x.preamble.name == action)
    fields = [(f.name, (f.bitwidth + 7) // 8) for f in t.match_fields]
    params = [p.name for p in a.params]
    rows, n = iter(rows), 0
    while True:
        with sw.collect() as ups:
            for keys, vals in itertools.islice(rows, batch):
                sw.table_insert(table, {name: ("exact", v.to_bytes(w, "big")) for (name, w), v in zip(fields, keys)},
                                action, dict(zip(params, vals)))
        if not ups:
            return n
        sw.write_async(ups).result()
        n += len(ups)

def domains(path):
    return dpi.read_list(pathlib.Path(path).read_text(), path) if path else []

def fast_setup(out):
    sw.push(pathlib.Path(out))
    sw.table_insert("UfIngress.uf_port", {"sm.ingress_port": ("exact", b"\x01")}, "UfIngress.forward", {"port": 2})
    sw.table_insert("UfIngress.uf_port", {"sm.ingress_port": ("exact", b"\x02")}, "UfIngress.forward", {"port": 1})
    return {}

def fast_load(path):
    dfa = dpi.Dfa(domains(path), payload=True)
    sw.extern_write("UfIngress.blocklist", "load", json.loads(dpi.automaton_json(dfa)))
    return {"states": dfa.states}

def recirc_load(out, path):
    # a fresh pipeline empties every table; then the tables of tests/dpi/test_url_filter_recirculate.py
    sw.push(pathlib.Path(out))
    dfa = dpi.Dfa(domains(path), payload=True)
    n = insert_many("UfrIngress.byte_class", "UfrIngress.set_class",
                    (((mode, b), (c,)) for mode, classes in ((0, dpi.CLASS_OF), (1, dpi.CLASS_OF_DNS))
                     for b, c in enumerate(classes) if c != 0))
    e = insert_many("UfrIngress.dfa", "UfrIngress.step", (((s, c), (t, int(b))) for s, c, t, b in dfa.entries()))
    insert_many("UfrEgress.dfa_start", "UfrEgress.set_start", [((0,), (dfa.delta[0].get(dpi.END, 0),)), ((1,), (0,))])
    insert_many("UfrIngress.ufr_port", "UfrIngress.forward", [((1,), (2,)), ((2,), (1,))])
    req = p4runtime_pb2.WriteRequest(device_id=sw.device_id)
    req.election_id.low = sw.election_id
    u = req.updates.add(type=p4runtime_pb2.Update.INSERT)
    c = u.entity.packet_replication_engine_entry.clone_session_entry
    c.session_id = 100
    c.replicas.add(egress_port=99)
    sw.stub.Write(req)
    return {"states": dfa.states, "dfa_entries": e, "byte_class_entries": n}

def counters(name, n):
    return {"counters": [sw.counter_read(name, i)[0] for i in range(n)]}

print(json.dumps({"ok": True}), flush=True)
for line in sys.stdin:
    cmd = json.loads(line)
    try:
        t0 = time.perf_counter()
        op = cmd.pop("op")
        r = {"fast_setup": fast_setup, "fast_load": fast_load, "recirc_load": recirc_load, "counters": counters}[op](**cmd)
        r["ok"], r["seconds"] = True, time.perf_counter() - t0
    except Exception as e:
        r = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
    print(json.dumps(r), flush=True)
sw.close()
"""


class P4secSwitch:
    """`p4sec switch` owning s1/s2 in namespace M, and a control client (inside M) driven over a pipe."""

    def __init__(self, t, p4sec_bin, workdir):
        self.t, self.ctl, self.sw = t, None, None
        port = free_port_in(t.m)
        self.log_path = workdir / f"switch-{port}.log"
        self.log = open(self.log_path, "w")
        try:
            self.sw = subprocess.Popen(["ip", "netns", "exec", t.m, p4sec_bin, "switch", "--grpc", f"127.0.0.1:{port}",
                                        "--port", f"1={t.s1}", "--port", f"2={t.s2}"], stdout=self.log, stderr=self.log,
                                       preexec_fn=(lambda: os.sched_setaffinity(0, {t.fwd_cpu})) if t.fwd_cpu is not None else None)
            time.sleep(0.3)
            if self.sw.poll() is not None:
                raise BenchError(f"p4sec switch exited at start: {self.log_tail()}")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "python")] + [
                p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
            self.ctl = subprocess.Popen(["ip", "netns", "exec", t.m, sys.executable, "-c", CONTROL, f"127.0.0.1:{port}"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env,
                                        preexec_fn=lambda: os.sched_setaffinity(0, t.cpus))
            self._reply("start")
        except BaseException:
            self.close()
            raise

    def log_tail(self):
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-1500:].strip()

    def _reply(self, what):
        line = self.ctl.stdout.readline()
        if not line:
            raise BenchError(f"switch control ({what}): the control client exited: {self.log_tail()}")
        r = json.loads(line)
        if not r.get("ok"):
            dead = "" if self.sw.poll() is None else f" (p4sec switch exited: {self.log_tail()})"
            raise BenchError(f"switch control ({what}): {r.get('error')}{dead}")
        return r

    def call(self, op, **kw):
        self.ctl.stdin.write(json.dumps(dict(kw, op=op)) + "\n")
        self.ctl.stdin.flush()
        return self._reply(op)

    def close(self):
        if self.ctl:
            with contextlib.suppress(Exception):
                self.ctl.stdin.close()
                self.ctl.wait(timeout=10)
            if self.ctl.poll() is None:
                self.ctl.kill()
        if self.sw:
            self.sw.terminate()
            try:
                self.sw.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.sw.kill()
                self.sw.wait()
        self.log.close()


def free_port_in(netns):
    with in_netns(netns):
        s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Netfilter:
    name = "netfilter"

    def __init__(self, t, workdir):
        self.t, self.workdir = t, workdir
        t.kernel_forwarding(True)

    def load(self, n, path):
        doms = dpi.read_list(path.read_text()) if n else []
        rules = "".join(f'-A FORWARD -m string --algo bm --string "{d}" -j DROP\n' for d in doms)
        t0 = time.perf_counter()
        ns(self.t.m, "iptables-restore", input=f"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n{rules}COMMIT\n")
        secs = time.perf_counter() - t0
        count = sum(1 for l in ns(self.t.m, "iptables", "-S", "FORWARD").stdout.splitlines()
                    if l.startswith("-A FORWARD") and "--string" in l)
        if count != n:
            raise BenchError(f"netfilter: {count} string rules in FORWARD after loading {n}")
        return {"rules": count, "load_seconds": secs}

    def close(self):
        ns(self.t.m, "iptables", "-F", check=False)
        self.t.kernel_forwarding(False)


class Fast:
    name = "fast"

    def __init__(self, t, p4sec_bin, workdir, out):
        self.sw = P4secSwitch(t, p4sec_bin, workdir)
        try:
            self.sw.call("fast_setup", out=str(out))
        except BaseException:
            self.sw.close()
            raise

    def load(self, n, path):
        r = self.sw.call("fast_load", path=str(path) if n else None)
        return {"states": r["states"], "load_seconds": r["seconds"]}

    def counters(self):
        """uf_stats: inspected and passed, blocked, not inspected, no route (cumulative over the run)."""
        return dict(zip(("passed", "blocked", "not_inspected", "no_route"), self.sw.call("counters", name="UfIngress.uf_stats", n=4)["counters"]))

    def close(self):
        self.sw.close()


class Recirc:
    name = "recirc"

    def __init__(self, t, p4sec_bin, workdir, out):
        self.out = out
        self.sw = P4secSwitch(t, p4sec_bin, workdir)

    def load(self, n, path):
        r = self.sw.call("recirc_load", out=str(self.out), path=str(path) if n else None)
        return {"states": r["states"], "dfa_entries": r["dfa_entries"], "load_seconds": r["seconds"]}

    def counters(self):
        """ufr_stats since this list was loaded: passed, blocked, not inspected, scanner passes, waiting passes."""
        return dict(zip(("passed", "blocked", "not_inspected", "scanner_passes", "waiting_passes"),
                        self.sw.call("counters", name="UfrIngress.ufr_stats", n=5)["counters"]))

    def close(self):
        self.sw.close()
