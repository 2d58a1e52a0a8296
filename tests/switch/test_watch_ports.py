"""Watch ports of action selector group members (ActionProfileGroup.Member `watch_port`, and the deprecated
`watch`): a member whose watch port is down is left out of the selector's choice until the port is up again.
The switch has two veth ports whose state the test changes (link down, deleted); frames enter as PacketOut
(tests/switch/programs/profiles.p4) and come back with the chosen member's tag. Needs root."""
import os
import subprocess
import time
import uuid

import p4sec  # noqa: F401
import grpc
import pytest
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from test_p4runtime import free_port
from test_p4runtime_profiles import CPU, DST, ELECTION, ETH_TYPE, OK, INVALID_ARGUMENT, U, Ids, codes, compiled, entry, group, member, push, read, src, write  # noqa: F401
from test_packet_io import Stream

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (veth interfaces)")


def ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True)


@pytest.fixture
def veths():
    tag = uuid.uuid4().hex[:5]
    names = [f"wp{tag}a", f"wp{tag}b"]
    for n in names:
        ip("link", "add", n, "type", "veth", "peer", "name", n + "p")
        for x in (n, n + "p"):  # no IPv6 chatter into the pipeline
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{x}.disable_ipv6=1"], capture_output=True)
            ip("link", "set", x, "up")
    yield names
    for n in names:
        ip("link", "del", n, check=False)


@pytest.fixture
def sw(p4sec_bin, compiled, veths):  # noqa: F811
    port = free_port()
    cmd = [str(p4sec_bin), "switch", "--grpc", f"127.0.0.1:{port}", "--cpu-port", str(CPU), "--port", f"1={veths[0]}", "--port", f"2={veths[1]}"]
    proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    grpc.channel_ready_future(channel).result(timeout=20)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    s = Stream(stub, ELECTION)
    assert s.next("arbitration").status.code == OK
    push(stub, compiled, ELECTION)
    yield stub, s, Ids(compiled[1]), veths
    s.close()
    channel.close()
    proc.terminate()
    proc.wait(timeout=10)


FLOWS = range(40)


def send(s, ids, dst, src):
    """One frame through the pipeline as PacketOut: the selector's tag from the result header of the PacketIn
    it comes back as (frames the veths bring in also reach the CPU port: they are skipped)."""
    frame = dst + src + ETH_TYPE.to_bytes(2, "big") + bytes(3) + bytes(40)
    s.packet_out(frame, [(ids.meta["packet_out"]["egress_port"], b"\x01"), (ids.meta["packet_out"]["pad"], b"\x00")])
    while True:
        pin = s.next("packet")
        if pin.payload[:14] == frame[:14]:
            return tuple(pin.payload[14:17])


def tags(s, ids):
    return {send(s, ids, DST, src(i))[0] for i in FLOWS}


def until(what, check, seconds=6):
    end = time.monotonic() + seconds
    while True:
        got = check()
        if got or time.monotonic() > end:
            assert got, what
            return
        time.sleep(0.2)


def watched_group(ids, kind, members):
    """A group update whose members are (member id, watch kind, value)."""
    u = group(ids, kind, ids.sel, 1, [(m, 1) for m, _, _ in members])
    for g, (_, how, value) in zip(u.entity.action_profile_group.members, members):
        if how == "port":
            g.watch_port = value
        elif how == "watch":
            g.watch = value
    return u


def test_members_whose_watch_port_is_down_are_not_chosen(sw):
    stub, s, ids, veths = sw
    write(stub, *[member(ids, U.INSERT, ids.sel, m, ids.action("set_sel", m)) for m in (1, 2, 3)])
    write(stub, watched_group(ids, U.INSERT, [(1, "port", b"\x01"), (2, "watch", 2), (3, None, None)]))
    write(stub, entry(ids, U.INSERT, "sel_t", DST, group_id=1))
    until("all three members chosen while both ports are up", lambda: tags(s, ids) == {1, 2, 3})
    # reads return the watch ports as written
    got = read(stub, lambda e: setattr(e.action_profile_group, "action_profile_id", ids.sel))
    ms = {m.member_id: (m.WhichOneof("watch_kind"), getattr(m, m.WhichOneof("watch_kind")) if m.WhichOneof("watch_kind") else None) for m in got[0].action_profile_group.members}
    assert ms == {1: ("watch_port", b"\x01"), 2: ("watch", 2), 3: (None, None)}
    # port 1 down: member 1 is left out; flows keep going to the others
    ip("link", "set", veths[0], "down")
    until("member 1 left out while port 1 is down", lambda: tags(s, ids) == {2, 3})
    ip("link", "set", veths[0], "up")
    until("member 1 back once port 1 is up", lambda: tags(s, ids) == {1, 2, 3})
    # the peer of port 2 down (no carrier): member 2 is left out
    ip("link", "set", veths[1] + "p", "down")
    until("member 2 left out while port 2 has no carrier", lambda: tags(s, ids) == {1, 3})
    ip("link", "set", veths[1] + "p", "up")
    until("member 2 back", lambda: tags(s, ids) == {1, 2, 3})
    # port 2 deleted: member 2 is left out for good; a MODIFY of the group keeps honouring the watch ports
    ip("link", "del", veths[1])
    until("member 2 left out once port 2 is gone", lambda: tags(s, ids) == {1, 3})
    write(stub, watched_group(ids, U.MODIFY, [(1, "port", b"\x01"), (2, "port", b"\x00\x02")]))
    assert tags(s, ids) == {1}
    # a watch port no port has (never up): its member is never chosen
    write(stub, watched_group(ids, U.MODIFY, [(1, "port", b"\x07"), (3, None, None)]))
    assert tags(s, ids) == {3}
    # all members down: the group is empty and the table misses
    write(stub, watched_group(ids, U.MODIFY, [(1, "port", b"\x07")]))
    assert tags(s, ids) == {0}


def test_bad_watch_ports(sw):
    stub, s, ids, _ = sw
    write(stub, member(ids, U.INSERT, ids.sel, 1, ids.action("set_sel", 1)))
    assert codes(stub, watched_group(ids, U.INSERT, [(1, "port", b"\x01\x02\x03\x04\x05")])) == [INVALID_ARGUMENT]
    assert codes(stub, watched_group(ids, U.INSERT, [(1, "watch", -3)])) == [INVALID_ARGUMENT]
    assert read(stub, lambda e: setattr(e.action_profile_group, "action_profile_id", ids.sel)) == []
