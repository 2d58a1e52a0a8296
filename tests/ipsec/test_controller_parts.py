"""The controller's parts on their own interfaces, in process and without switches: StoreFaults
(p4sec.ipsec.failsafe) driven by hand (no retry thread) with a store that fails on demand, and HostTunnels
(p4sec.ipsec.hosts) and SiteTunnels (p4sec.ipsec.sites) on gateways whose switches record what they are sent; and
the seams: recovery uses only the controller's public members its description names; the other parts are handed
what they use (and use all of it), never the controller; no module but the store's writes SQL or builds its keys."""
import contextlib
import re
import threading
import time

import pytest

from p4sec.ipsec import gateway as gwp
from p4sec.ipsec import store
from p4sec.ipsec.controller import IpsecController
from p4sec.ipsec.ctlbase import ControllerError, Gateway
from p4sec.ipsec.failsafe import StoreFaults
from p4sec.ipsec.store import StoreError


# ---------------------------------------------------------------------------------------------- StoreFaults

class Flaky:
    """A store (SQLite in memory) that refuses every statement while `failing`, as the fail-safe store does."""

    def __init__(self):
        self.db, self.failing = store.sqlite(":memory:"), False
        self.db.executescript(store.SCHEMA)

    def health(self):
        return (False, "disk full") if self.failing else (True, "ok")

    def execute(self, sql, args=()):
        if self.failing:
            raise StoreError("disk full")
        return self.db.execute(sql, args)

    def commit(self):
        if self.failing:
            raise StoreError("disk full")
        self.db.commit()


class Parts:
    """A StoreFaults with what it needs from a controller, recorded: the renewals and retirements it asks for."""

    def __init__(self):
        self.db, self.away, self.closed = Flaky(), set(), threading.Event()
        self.records = store.Records(self.db)
        self.renewed, self.retired, self.renew_fails = [], [], 0
        self.rows = []
        self.faults = StoreFaults(self.records, threading.RLock(), self.closed, self.away, self.renew, self.retire, self.read)

    def renew(self, spi, reason):
        if self.renew_fails:
            self.renew_fails -= 1
            raise StoreError("disk full")
        self.renewed.append((spi, reason))

    def retire(self, spi, attempts):
        self.retired.append((spi, attempts))

    def read(self):
        if self.db.failing:
            raise StoreError("disk full")
        return [dict(t) for t in self.rows]


def due(faults):
    """Make every pending retry due now (the backoff's wait is what the tests skip)."""
    for p in faults.pending.values():
        p["next"] = 0
    for r in faults.retirements.values():
        r[1] = 0


def test_a_failed_renewal_stays_pending_and_is_retried_once_due():
    t = Parts()
    t.renew_fails = 1
    t.faults.renew_or_retry(0x1234, "soft lifetime on B")
    p = t.faults.pending[0x1234]
    assert p["attempts"] == 1 and p["error"] == "disk full" and t.faults.renewals_failed == 1 and t.renewed == []
    t.faults.retry_once()          # not due yet (its backoff): not retried
    assert t.renewed == [] and 0x1234 in t.faults.pending
    due(t.faults)
    t.faults.retry_once()
    assert t.renewed == [(0x1234, "soft lifetime on B (retried, attempt 2)")] and t.faults.pending == {}


def test_a_renewal_by_slot_is_resolved_from_the_store():
    t = Parts()
    t.records.add_sa(0x77, "T", "A", "B", 3, 5, {}, "active")
    t.faults.renew_or_retry(("B", 5), "hard lifetime on B")     # the digest named the slot only
    t.faults.renew_or_retry(("B", 9), "hard lifetime on B")     # no active SA there: nothing to renew
    assert t.renewed == [(0x77, "hard lifetime on B")] and t.faults.pending == {}


def test_a_renewal_through_an_unreachable_gateway_waits_for_it():
    t = Parts()
    t.records.add_sa(0x55, "T", "A", "B", 0, 1, {}, "active")
    t.renew_fails = 1
    t.faults.renew_or_retry(0x55, "soft")
    t.away.add("B")
    due(t.faults)
    t.faults.retry_once()
    assert t.renewed == [] and 0x55 in t.faults.pending
    t.away.discard("B")
    t.faults.retry_once()
    assert [spi for spi, _ in t.renewed] == [0x55] and t.faults.pending == {}


def test_a_failed_retirement_is_retried_with_its_attempts():
    t = Parts()
    t.faults.retire_failed(0x99, 0, StoreError("disk full"))
    t.faults.retire_failed(0x99, 1, StoreError("disk full"))
    assert t.faults.retirements[0x99][0] == 2
    t.faults.retry_once()
    assert t.retired == []          # not due yet
    due(t.faults)
    t.faults.retry_once()
    assert t.retired == [(0x99, 2)] and t.faults.retirements == {}


def test_unfinished_records_wait_for_the_store_in_order():
    t = Parts()
    done, refused = [], {1: 1}      # record 1's commit is refused once more, when the store's probe already works

    def record(what):
        def fn():
            if refused.get(what):
                refused[what] -= 1
                raise StoreError("disk full")
            done.append(what)
        return fn
    t.db.failing = True
    t.faults.finish_later("renewal 1", record(1), StoreError("disk full"))
    t.faults.finish_later("renewal 2", record(2), StoreError("disk full"))
    t.faults.retry_once()           # the store's probe fails: nothing is tried
    assert done == [] and len(t.faults.unfinished) == 2 and refused[1] == 1
    t.db.failing = False
    t.faults.retry_once()           # record 1 refused again: it stays first, record 2 waits behind it
    assert done == [] and len(t.faults.unfinished) == 2 and refused[1] == 0
    t.faults.retry_once()
    assert done == [1, 2] and t.faults.unfinished == []


def test_tunnels_show_the_last_state_read_degraded_while_the_store_is_unreadable():
    t = Parts()
    t.rows = [{"name": "T", "a": "A", "b": "B", "state": "up", "active_spis": ["0x00000011"]},
              {"name": "D", "a": "A", "b": "B", "state": "down", "active_spis": []}]
    assert [x["state"] for x in t.faults.tunnels()] == ["up", "down"]
    t.db.failing = True
    shown = {x["name"]: x for x in t.faults.tunnels()}
    assert shown["T"]["stale"] and shown["T"]["state"] == "degraded", shown
    assert any("store unreadable: disk full" in w for w in shown["T"]["degraded_by"]), shown["T"]
    assert shown["D"]["state"] == "down" and "degraded_by" not in shown["D"]
    h = t.faults.health()
    assert not h["ok"] and h["store"] == "disk full" and set(h["degraded"]) == {"T"}, h


def test_degraded_by_names_the_pending_renewal_and_the_unreachable_gateway():
    t = Parts()
    t.renew_fails = 1
    t.faults.renew_or_retry(0x11, "soft")
    t.away.add("B")
    why = t.faults.degraded_by("T", "A", "B", [0x11], True, "ok")
    assert why[0] == "gateway B is unreachable" and "renewal of SA 0x00000011 failing" in why[1] and len(why) == 2, why
    assert t.faults.degraded_by("U", "A", "C", [0x12], True, "ok") == []


def test_metrics_count_the_renewals_the_controller_reports():
    t = Parts()
    t.rows = [{"name": "T", "a": "A", "b": "B", "state": "up", "active_spis": []}]
    t.renew_fails = 1
    t.faults.renew_or_retry(0x11, "soft")
    m = t.faults.metrics(7)
    assert "p4sec_controller_renewals_total 7\n" in m and "p4sec_controller_renewals_failed_total 1\n" in m, m
    assert "p4sec_controller_renewals_pending 1\n" in m and 'p4sec_controller_tunnels{state="up"} 1\n' in m, m


def test_the_retry_loop_runs_until_closed():
    t = Parts()
    t.renew_fails = 1
    t.faults.renew_or_retry(0x21, "soft")
    t.faults.start()
    end = time.monotonic() + 10
    while t.faults.pending and time.monotonic() < end:
        time.sleep(0.05)
    assert [spi for spi, _ in t.renewed] == [0x21] and t.faults.pending == {}
    t.closed.set()
    t.faults.thread.join(5)
    assert not t.faults.thread.is_alive()


# ---------------------------------------------------------------------------------------------- HostTunnels

class RecordingSwitch:
    """Records extern writes (slot, SPI or None for a delete) and table writes (op, table) as it applies them,
    one call at a time or as Writes (collect, write_async); refuses every write while `refuse`, and Writes that
    touch a table in `refuse_tables`."""

    def __init__(self):
        self.sas, self.tables, self.refuse, self.refuse_tables = [], [], False, set()
        self.collected = None

    @contextlib.contextmanager
    def batch(self):
        yield

    @contextlib.contextmanager
    def collect(self):
        self.collected = []
        try:
            yield self.collected
        finally:
            self.collected = None

    def _do(self, op):
        if self.collected is not None:
            self.collected.append(op)
        else:
            self.apply([op])

    def apply(self, ops):
        if self.refuse or any(kind == "table" and x[1] in self.refuse_tables for kind, x in ops):
            raise RuntimeError("switch refused the write")
        for kind, x in ops:
            (self.sas if kind == "sa" else self.tables).append(x)

    def write_async(self, ups, deferred=False):
        return Written(self, ups, deferred)

    def extern_write(self, extern, method, args, delete=False):
        self._do(("sa", (args["index"], None if delete else args["sa"]["spi"])))

    def table_insert(self, table, match, action, params, priority=0):
        self._do(("table", ("insert", table)))

    def table_delete(self, table, match, priority=0):
        self._do(("table", ("delete", table)))


class Written:
    """A Write in flight on a RecordingSwitch: applied when its result is asked for."""

    def __init__(self, switch, ups, deferred):
        self.switch, self.ups, self.deferred, self.done = switch, ups, deferred, False

    def result(self):
        if not self.done:
            self.done = True
            self.switch.apply(self.ups)


def gateway(name, address, lan):
    return Gateway(name, RecordingSwitch(), address, lan, 1, "02:00:00:00:00:0a", 2, "02:00:00:00:00:0b", "0.0.0.0/0")


@pytest.fixture
def ctl():
    c = IpsecController(grace=60)      # old SAs retire at close (cancelled): none while a test looks
    for gw in (gateway("G", "192.0.2.1", "10.1.0.0/16"), gateway("H", "198.51.100.1", "10.2.0.0/16")):
        c.gateways[gw.name] = gw
    yield c
    c.close()


def states(ctl, name):
    return {(s["src"], s["dst"], s["state"]) for s in ctl.sas(name)}


def test_a_host_tunnel_through_its_phases_and_renewal(ctl):
    hosts, sw = ctl.hosts, ctl.gateways["G"].switch
    up = hosts.up("alice", "office", "G", "198.51.100.7", "02:00:00:00:77:77", "10.9.0.1")
    name = "office@alice"
    up_spi, down_spi = up["outbound"]["spi"], up["inbound"]["spi"]
    assert up["tunnel"] == name and up["inner"] == "10.9.0.1/32" and up["site"] == "10.1.0.0/16"
    # phase 1: the gateway learns the host's SA (its slot, SAD-dec) and a route to the host, and sends nothing yet
    assert [spi for _, spi in sw.sas] == [up_spi] and ("insert", gwp.sad_dec(4)) in sw.tables
    assert hosts.is_host_sa(up_spi) and hosts.is_host_sa(down_spi)
    assert hosts.inner(name) == "10.9.0.1/32" and hosts.info(name) == {"address": "198.51.100.7", "mac": "02:00:00:00:77:77"}
    assert [t["state"] for t in ctl.tunnels()] == ["pending"]
    hosts.ready("alice", "office")
    assert [spi for _, spi in sw.sas] == [up_spi, down_spi] and [t["state"] for t in ctl.tunnels()] == ["up"]
    assert states(ctl, name) == {("host:alice", "G", "active"), ("G", "host:alice", "active")}
    # renewal: the host's next SA inbound at once, the gateway's next one only once the agent is ready
    nxt = hosts.renew("alice", "office")
    assert hosts.renewals == 1 and ctl.renewals == 1
    assert states(ctl, name) >= {("host:alice", "G", "retiring"), ("G", "host:alice", "inbound")}
    hosts.renew_ready("alice", "office")
    assert sw.sas[-1][1] == nxt["inbound"]["spi"]
    assert ("G", "host:alice", "active") in states(ctl, name) and ("G", "host:alice", "inbound") not in states(ctl, name)
    with pytest.raises(ControllerError, match="no renewal of office@alice is waiting"):
        hosts.renew_ready("alice", "office")
    hosts.down("alice", "office")
    assert [t["state"] for t in ctl.tunnels()] == ["down"] and {s["state"] for s in ctl.sas(name)} == {"deleted"}
    assert ctl.intents() == []


def test_a_host_phase_1_the_switch_refuses_leaves_nothing_recorded(ctl):
    ctl.gateways["G"].switch.refuse = True
    with pytest.raises(RuntimeError, match="refused"):
        ctl.hosts.up("bob", "office", "G", "198.51.100.8", "02:00:00:00:88:88", "10.9.0.2")
    assert [t["state"] for t in ctl.tunnels()] == ["down"]
    assert {s["state"] for s in ctl.sas("office@bob")} == {"deleted"} and ctl.intents() == []
    with pytest.raises(ControllerError, match="no pending tunnel office@bob"):
        ctl.hosts.ready("bob", "office")


def test_the_controller_hands_its_host_operations_to_its_part(ctl):
    up = ctl.host_up("carol", "office", "G", "198.51.100.9", "02:00:00:00:99:99", "10.9.0.3/32", encap="udp")
    assert up["outbound"]["udp_encap"] == [4500, 4500] and ctl.hosts.inner("office@carol") == "10.9.0.3/32"
    ctl.host_ready("carol", "office")
    ctl.host_renew("carol", "office")
    ctl.host_renew_ready("carol", "office")
    ctl.host_down("carol", "office")
    assert ctl.renewals == 1 and [t["state"] for t in ctl.tunnels()] == ["down"]
    with pytest.raises(ControllerError, match="unknown encapsulation 'gre'"):
        ctl.host_up("dave", "office", "G", "198.51.100.10", "02:00:00:00:aa:aa", "10.9.0.4", encap="gre")


# ---------------------------------------------------------------------------------------------- SiteTunnels

def test_a_site_tunnel_receives_on_both_gateways_before_either_sends_and_goes_down_in_reverse(ctl):
    g, h = ctl.gateways["G"], ctl.gateways["H"]
    pairs = ctl.sites.up("G", "H", name="T")
    (gh_spi, gh_out), (hg_spi, hg_out) = pairs[("G", "H")], pairs[("H", "G")]
    # each gateway got the SA it receives under, then the one it sends with (its policy after it)
    assert [spi for _, spi in g.switch.sas] == [hg_spi, gh_spi] and [spi for _, spi in h.switch.sas] == [gh_spi, hg_spi]
    for sw in (g.switch, h.switch):
        t = [table for op, table in sw.tables]
        assert t.index(gwp.sad_dec(4)) < t.index(gwp.spd(4)), sw.tables
    assert [t["state"] for t in ctl.tunnels()] == ["up"] and ctl.intents() == []
    ctl.sites.down("T")
    # policies go first, the SAs last; every slot is free again
    for sw, out_slot in ((g.switch, gh_out), (h.switch, hg_out)):
        deletes = [table for op, table in sw.tables if op == "delete"]
        assert deletes[0] == gwp.spd(4) and gwp.sad_dec(4) in deletes, sw.tables
        assert {slot for slot, spi in sw.sas if spi is None} == {slot for slot, spi in sw.sas if spi is not None}
    assert sorted(g.free_slots) == [0, 1] and sorted(h.free_slots) == [0, 1]
    assert [t["state"] for t in ctl.tunnels()] == ["down"] and {s["state"] for s in ctl.sas("T")} == {"deleted"}
    with pytest.raises(ControllerError, match="no tunnel T is up"):
        ctl.sites.down("T")


def test_a_site_tunnel_one_gateway_refuses_is_undone_on_both(ctl):
    g, h = ctl.gateways["G"], ctl.gateways["H"]
    h.switch.refuse_tables = {gwp.spd(4)}       # phase 2 (SAD-enc and policy) refused by H
    with pytest.raises(RuntimeError, match="refused"):
        ctl.connect("G", "H", name="T")
    # what G and H accepted went again: every SA written was deleted, every entry inserted removed
    for sw in (g.switch, h.switch):
        assert {slot for slot, spi in sw.sas if spi is not None} == {slot for slot, spi in sw.sas if spi is None}, sw.sas
        assert sorted(table for op, table in sw.tables if op == "insert") == \
            sorted(table for op, table in sw.tables if op == "delete"), sw.tables
    assert ctl.tunnels() == [] and ctl.sas() == [] and ctl.intents() == []
    assert sorted(g.free_slots) == [0, 1] and sorted(h.free_slots) == [0, 1]


def test_ikev2_tunnels_are_refused_to_the_site_operations(ctl):
    ctl.db.execute("insert into tunnel values ('ike-G-1', 'G', 'ike:203.0.113.9', 'aes-gcm-128', 'null', 'null', 0, 'up')")
    ctl.db.commit()
    with pytest.raises(ControllerError, match="negotiated by IKEv2 with 203.0.113.9: its charon deletes it"):
        ctl.disconnect("ike-G-1")
    with pytest.raises(ControllerError, match="negotiated by IKEv2 with 203.0.113.9: its charon rekeys it"):
        ctl.rekey("ike-G-1")
    assert [t["state"] for t in ctl.tunnels()] == ["up"]


# ---------------------------------------------------------------------------------------------- the seams

# what recovery may use of the controller, as its module's description says
SEAMS = {
    "recovery": {"records", "lock", "gateways", "event", "reconcile", "renew", "connect", "retire_later", "watch", "tunnel_sites",
                 "tunnel_encap"},
}
# the parts that are handed what they use (their constructor's parameters, as their descriptions say), not the controller
HANDED = {
    "failsafe": ("StoreFaults", ("db", "lock", "closed", "away", "renew", "retire", "read_tunnels")),
    "hosts": ("HostTunnels", ("records", "lock", "gateways", "journal", "event", "reconcile", "retire_later", "make_sa",
                              "selectors", "undo_in", "grace")),
    "reconcile": ("Reconciler", ("records", "lock", "gateways", "journal", "away", "closed", "event", "renew", "desired_hooks")),
    "sites": ("SiteTunnels", ("records", "lock", "gateways", "journal", "event", "reconcile", "make_sa")),
}


def module_tree(module):
    import ast
    import pathlib
    import p4sec.ipsec
    return ast.parse((pathlib.Path(p4sec.ipsec.__file__).parent / f"{module}.py").read_text())


def controller_members_used(module):
    """The attributes a module reads of the controller (`ctl.X` or `self.ctl.X`)."""
    import ast
    used = set()
    for n in ast.walk(module_tree(module)):
        if isinstance(n, ast.Attribute):
            v = n.value
            if (isinstance(v, ast.Name) and v.id == "ctl") or \
                    (isinstance(v, ast.Attribute) and v.attr == "ctl" and isinstance(v.value, ast.Name) and v.value.id == "self"):
                used.add(n.attr)
    return used


@pytest.mark.parametrize("module", sorted(SEAMS))
def test_each_part_uses_only_the_public_members_its_description_names(module):
    used = controller_members_used(module)
    assert not {m for m in used if m.startswith("_")}, f"{module} reaches into the controller's private members: {used}"
    assert used <= SEAMS[module], f"{module} uses {sorted(used - SEAMS[module])} of the controller beyond its seam"


def members_used_of_self(cls_node):
    """{name} of the `self.X` a class reads outside its __init__."""
    import ast
    used = set()
    for f in cls_node.body:
        if isinstance(f, ast.FunctionDef) and f.name != "__init__":
            used |= {n.attr for n in ast.walk(f) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"}
    return used


@pytest.mark.parametrize("module", sorted(HANDED))
def test_each_narrow_part_is_handed_what_its_description_names_and_uses_all_of_it(module):
    import ast
    import importlib
    import inspect
    cls_name, handed = HANDED[module]
    mod = importlib.import_module(f"p4sec.ipsec.{module}")
    cls = getattr(mod, cls_name)
    assert tuple(inspect.signature(cls).parameters) == handed, f"{cls_name} takes {tuple(inspect.signature(cls).parameters)}"
    assert getattr(mod, "SEAM", handed) == handed, f"{module}.SEAM differs from {cls_name}'s parameters"
    tree = module_tree(module)
    # it never sees the controller
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
    assert "ctl" not in names and not controller_members_used(module), f"{module} still reaches the controller"
    # each thing handed is named in its description and used by the part (no wider contract than it needs)
    doc = (cls.__doc__ or "") + (mod.__doc__ or "")
    assert all(f"`{h}" in doc for h in handed), [h for h in handed if f"`{h}" not in doc]
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name)
    init = next(f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    kept = {t.attr: v.id for a in ast.walk(init) if isinstance(a, ast.Assign)
            for t, v in zip(a.targets[0].elts if isinstance(a.targets[0], ast.Tuple) else [a.targets[0]],
                            a.value.elts if isinstance(a.value, ast.Tuple) else [a.value])
            if isinstance(t, ast.Attribute) and isinstance(v, ast.Name)}
    unused = [h for h in handed if h not in {kept.get(m, m) for m in members_used_of_self(node)}]
    assert not unused, f"{cls_name} is handed {unused} and does not use them"


SQL = re.compile(r"^\s*(select\b.*\bfrom|insert (or replace )?into|update \w+ set|delete from|create (table|index)|alter table|pragma)\b",
                 re.DOTALL)
# the store's own modules: store.py (the records, SQLite) and ha.py (the PostgreSQL connection, its schema and lease)
STORE_MODULES = {"store.py", "ha.py"}


def test_only_the_store_writes_sql_or_builds_its_keys():
    import ast
    import pathlib
    import p4sec.ipsec
    found = []
    for path in sorted(pathlib.Path(p4sec.ipsec.__file__).parent.glob("*.py")):
        if path.name in STORE_MODULES:
            continue
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and (SQL.match(n.value) or KEY.match(n.value)):
                found.append(f"{path.name}:{n.lineno}: {n.value[:60]!r}")
            elif isinstance(n, ast.JoinedStr) and n.values and isinstance(n.values[0], ast.Constant) and \
                    isinstance(n.values[0].value, str) and KEY.match(n.values[0].value):
                found.append(f"{path.name}:{n.lineno}: f{n.values[0].value!r}...")
    assert not found, "SQL or store keys outside the store:\n" + "\n".join(found)


# the key-value table's key kinds (p4sec.ipsec.store.Records)
KEY = re.compile(r"^(sites|encap|pair|inner|hostinfo|addr|ikeport|ikepol|ikesel):")


def test_the_controller_composes_its_parts_rather_than_inheriting_them(ctl):
    assert IpsecController.__bases__ == (object,)
    assert {type(getattr(ctl, p)).__name__ for p in ("journal", "recovery", "reconciler", "sites", "hosts", "faults")} == \
        {"IntentLog", "Recovery", "Reconciler", "SiteTunnels", "HostTunnels", "StoreFaults"}
