"""The controller's crash recovery on its own (p4sec.ipsec.recovery), without switches or namespaces: the intent
journal, which interrupted operations a restart rolls back and which it leaves for reconciliation to complete,
the SA slots rebuilt from the store, the lifetimes that ran out while no controller listened, `resume`, and a
switch that is lost and dialled again (fake switches stand for the P4Runtime connections). The end-to-end
behaviour (a controller killed at every checkpoint, then restarted) is tests/ipsec/test_controller_faults.py."""
import json
import threading
import time

import pytest

from p4sec.ipsec import gateway as gwp
from p4sec.ipsec.controller import Gateway, IpsecController
from p4sec.ipsec.recovery import IntentLog


class FakeSwitch:
    """What recovery asks of a runtime.Switch: SA statistics by slot, adopt, digests, close."""

    def __init__(self, stats=None, adopts=True, unreachable=False):
        self.stats, self.adopts, self.unreachable = stats or {}, adopts, unreachable
        self.digests, self.adopted_from, self.closed = [], None, False
        self.on_digest = self.on_lost = None

    def extern_read(self, extern, method, args):
        assert (extern, method) == (gwp.SAD, gwp.SA_STATS)
        if self.unreachable:
            raise ConnectionError("switch unreachable")
        return self.stats.get(args["index"])

    def adopt(self, program_dir):
        self.adopted_from = program_dir
        return self.adopts

    def digest_enable(self, name, **_):
        self.digests.append(name)

    def close(self):
        self.closed = True


class PushedGateway(Gateway):
    """A gateway whose pipeline push is recorded instead of sent."""

    pushed = None

    def setup(self, program_dir):
        self.pushed = program_dir


def gateway(name, switch, cls=Gateway):
    n = {"A": 1, "B": 2}[name]
    return cls(name, switch, f"192.0.2.{n}", f"10.{n}.0.0/16", 1, f"02:00:00:00:0{n}:01", 2, f"02:00:00:00:0{n}:02",
               "192.0.2.0/24")


@pytest.fixture
def ctl():
    c = IpsecController(":memory:", grace=0.05)
    yield c
    c.close()


def tunnel(ctl, name, a, b, state):
    ctl.db.execute("insert into tunnel values (?, ?, ?, 'aes-gcm-128', 'null', 'null', ?, ?)", (name, a, b, time.time(), state))


def sa(ctl, spi, tunnel_name, src, dst, out_slot, in_slot, state, address="203.0.113.7"):
    cfg = {"spi": spi, "tunnel": [address, "192.0.2.1"]}
    ctl.db.execute("insert into sa values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (spi, tunnel_name, src, dst, out_slot, in_slot, json.dumps(cfg), time.time(), state))


def states(ctl, table="sa", key="spi"):
    return dict(ctl.db.execute(f"select {key}, state from {table}").fetchall())


def events(ctl, tunnel_name):
    return [e[2] for e in ctl.events(tunnel_name)]


def wait_for(what, cond, timeout=10.0):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f"{what}: not after {timeout} s"
        time.sleep(0.01)


def test_intent_log_records_lists_and_forgets(ctl):
    log = IntentLog(ctl.records)
    a = log.record("setup", "T1", fresh=[0x111, 0x112])
    b = log.record("renew", "T2", fresh=[0x221], old=0x220)
    c = log.record("delete", "T3")
    assert [(i["id"], i["op"], i["tunnel"]) for i in log.all()] == [(a, "setup", "T1"), (b, "renew", "T2"), (c, "delete", "T3")]
    assert log.all()[1]["data"] == {"fresh": [0x221], "old": 0x220}
    assert log.fresh() == {0x111, 0x112, 0x221}
    log.done(a)
    assert log.fresh() == {0x221} and [i["op"] for i in log.all()] == ["renew", "delete"]
    assert ctl.intents() == log.all()       # the controller's view is the same journal
    log.clear()
    assert log.all() == [] and log.fresh() == set()


def test_a_restart_rolls_back_what_an_agent_asks_again_and_keeps_the_rest(ctl):
    # a road warrior's phase 1, interrupted: its tunnel is still pending, both SAs recorded
    tunnel(ctl, "office@alice", "A", "host:alice", "pending")
    sa(ctl, 0x100, "office@alice", "host:alice", "A", -1, 0, "active")
    sa(ctl, 0x101, "office@alice", "A", "host:alice", 1, -1, "inbound")
    ctl.journal.record("host-up", "office@alice", up=0x100, down=0x101)
    # a road warrior's renewal, interrupted: the new SAs recorded, the old one retiring
    tunnel(ctl, "home@bob", "A", "host:bob", "up")
    sa(ctl, 0x200, "home@bob", "host:bob", "A", -1, 2, "retiring")
    sa(ctl, 0x201, "home@bob", "host:bob", "A", -1, 3, "active")
    sa(ctl, 0x202, "home@bob", "A", "host:bob", 4, -1, "inbound")
    sa(ctl, 0x203, "home@bob", "A", "host:bob", 4, -1, "active")
    ctl.journal.record("host-renew", "home@bob", up=0x201, down=0x202, old=0x200)
    # a site-to-site setup, interrupted: it stands as recorded (reconciliation completes it)
    tunnel(ctl, "A-B", "A", "B", "up")
    sa(ctl, 0x300, "A-B", "A", "B", 5, 0, "active")
    sa(ctl, 0x301, "A-B", "B", "A", 0, 6, "active")
    ctl.journal.record("setup", "A-B", fresh=[0x300, 0x301])

    got = ctl.recovery.roll_back_interrupted()

    assert got == [("host-up", "office@alice", True), ("host-renew", "home@bob", True), ("setup", "A-B", False)]
    assert states(ctl, "tunnel", "name") == {"office@alice": "down", "home@bob": "up", "A-B": "up"}
    assert states(ctl) == {0x100: "deleted", 0x101: "deleted",
                           0x200: "active", 0x201: "deleted", 0x202: "deleted", 0x203: "active",
                           0x300: "active", 0x301: "active"}
    assert any("rolled back" in e for e in events(ctl, "office@alice"))
    assert any("rolled back" in e for e in events(ctl, "home@bob"))
    assert events(ctl, "A-B") == ["setup interrupted by a controller restart: completed from the recorded state"]
    # the journal stays until the switches are reconciled: the setup's SAs may still be sent outbound
    assert ctl.journal.fresh() == {0x300, 0x301}


def test_slots_are_rebuilt_from_the_store(ctl):
    gw = gateway("A", None)
    sa(ctl, 0x10, "A-B", "A", "B", 0, 7, "active")          # A sends with slot 0
    sa(ctl, 0x11, "A-B", "B", "A", 9, 3, "active")          # A receives in slot 3
    sa(ctl, 0x12, "A-B", "B", "A", 9, 2, "retiring")        # still decrypting packets in flight
    sa(ctl, 0x13, "A-B", "A", "B", 5, 8, "deleted")         # gone: its slot is free
    sa(ctl, 0x14, "h@c", "host:c", "A", -1, 6, "inbound")   # installed ahead of a renewal
    gw.free_slots, gw.next_slot = [42], 99                 # whatever was there before goes

    assert ctl.recovery.slots_from_store(gw) == {0, 2, 3, 6}
    assert gw.next_slot == 7 and gw.free_slots == [5, 4, 1]
    assert [gw.alloc_slot() for _ in range(5)] == [1, 4, 5, 7, 8]

    b = gateway("B", None)      # B receives 0x10 in slot 7, sends 0x11 and 0x12 from slot 9; 0x13 is deleted
    assert ctl.recovery.slots_from_store(b) == {7, 9}
    assert b.next_slot == 10 and b.free_slots == [8, 6, 5, 4, 3, 2, 1, 0]


def test_lifetimes_that_ran_out_while_away_are_found(ctl):
    a = gateway("A", FakeSwitch({0: {"soft_expired": False}, 1: {"soft_expired": True}, 2: {"hard_expired": True, "soft_expired": True}}))
    b = gateway("B", FakeSwitch(unreachable=True))
    ctl.gateways.update(A=a, B=b)
    sa(ctl, 0x20, "A-B", "A", "B", 0, 0, "active")          # in its lifetime
    sa(ctl, 0x21, "A-B", "A", "B", 1, 1, "active")          # soft limit reached
    sa(ctl, 0x22, "A-C", "A", "B", 2, 2, "active")          # hard limit reached
    sa(ctl, 0x23, "A-B", "A", "B", 1, 3, "retiring")        # not active: not renewed
    sa(ctl, 0x24, "A-B", "B", "A", 0, 4, "active")          # B cannot be asked: left out
    sa(ctl, 0x25, "h@c", "A", "host:c", 1, -1, "active")    # a host's SA: its agent renews it
    assert sorted(ctl.recovery.missed_lifetimes()) == [(0x21, "soft"), (0x22, "hard")]


def test_resume_rolls_back_clears_the_journal_and_retires_old_sas(ctl):
    tunnel(ctl, "office@alice", "A", "host:alice", "pending")
    sa(ctl, 0x100, "office@alice", "host:alice", "A", -1, 0, "active")
    ctl.journal.record("host-up", "office@alice", up=0x100, down=0x101)
    tunnel(ctl, "A-B", "A", "B", "up")
    sa(ctl, 0x30, "A-B", "A", "B", 0, 1, "retiring")        # its grace period was running at the crash
    sa(ctl, 0x31, "A-B", "A", "B", 0, 2, "active")
    ctl.journal.record("renew", "A-B", fresh=[0x31], old=0x30)
    ctl.db.commit()

    ctl.resume()

    assert ctl.intents() == []
    assert states(ctl, "tunnel", "name")["office@alice"] == "down"
    wait_for("the old SA retired after its grace period", lambda: states(ctl)[0x30] == "deleted")
    assert states(ctl)[0x31] == "active" and states(ctl)[0x100] == "deleted"


def dialler(new_switches, go):
    """A dial function that waits for `go`, then fails once (the switch not listening yet), then hands out the
    switches of `new_switches` in turn; the calls made."""
    calls = []

    def dial(old):
        go.wait(10)
        calls.append(old)
        if len(calls) == 1:
            raise ConnectionError("connection refused")
        return new_switches.pop(0)
    return dial, calls


@pytest.mark.parametrize("adopts", [True, False])
def test_a_lost_switch_is_degraded_then_dialled_again_and_taken_back(ctl, adopts):
    old, new = FakeSwitch(), FakeSwitch(adopts=adopts)
    gw = gateway("A", old, PushedGateway)
    ctl.gateways["A"] = gw
    ctl.programs["A"] = "/programs/gw"
    tunnel(ctl, "A-B", "A", "B", "up")
    tunnel(ctl, "A-C", "A", "C", "down")
    ctl.db.commit()
    go = threading.Event()
    ctl.recovery.dial, calls = dialler([new], go)

    ctl.recovery.lost("A")
    ctl.recovery.lost("A")          # the stream's end reported twice: one reconnection

    assert ctl.away == {"A"}
    health = ctl.health()
    assert not health["ok"] and health["unreachable"] == ["A"]
    assert events(ctl, "A-B") == ["degraded: gateway A is unreachable"]
    assert events(ctl, "A-C") == []
    go.set()
    wait_for("the reconnection's end (the old connection closed)", lambda: old.closed)
    assert ctl.away == set()
    assert len(calls) == 2 and all(c is old for c in calls)
    assert gw.switch is new and not new.closed
    assert new.adopted_from == "/programs/gw"
    assert gw.pushed == (None if adopts else "/programs/gw")
    assert new.digests == [gwp.SA_EVENT_DIGEST] and callable(new.on_lost) and callable(new.on_digest)
    back = "switch back: " + ("pipeline still running, adopted" if adopts else "pipeline pushed again")
    assert back in events(ctl, "A")
    assert any(e.startswith("up again: gateway A reconciled") for e in events(ctl, "A-B"))
    assert ctl.health()["unreachable"] == []


def test_a_lost_switch_is_not_dialled_after_close(ctl):
    gw = gateway("A", FakeSwitch())
    ctl.gateways["A"] = gw
    ctl.close()
    ctl.recovery.lost("A")
    assert ctl.away == set()
