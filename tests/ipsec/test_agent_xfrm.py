"""The agent's XFRM backend: the kernel's SA expire notifications (XFRM_MSG_EXPIRE on NETLINK_XFRM) are parsed and
lead to a renewal in the loss-free order; the states carry the profile's lifetimes as kernel limits; a failure
half-way is undone. This machine's kernel has no ESP, so the commands go to a recorder instead of the kernel and
the notifications are built here in the kernel's wire format (include/uapi/linux/xfrm.h); the netlink
subscription itself is made on the real kernel."""
import os
import socket
import struct
import threading
import time

import pytest

from p4sec.ipsec import agent_base, agent_xfrm


def sa_cfg(spi, src, dst, soft=None, hard=None):
    null = {"packets": None, "bytes": None, "seconds": None}
    return {"spi": spi, "cipher": "AesGcm128", "enc_key": list(range(20)), "replay_window": 1024, "esn": True, "tunnel": [src, dst],
            "soft": dict(null, **(soft or {})), "hard": dict(null, **(hard or {}))}


def expire_msg(spi, hard=False, typ=agent_xfrm.XFRM_MSG_EXPIRE):
    """One netlink message: nlmsghdr + struct xfrm_user_expire (xfrm_usersa_info, 224 bytes, then __u8 hard)."""
    info = bytearray(224)
    info[56:60] = bytes([192, 0, 2, 1])                 # id.daddr
    info[72:76] = struct.pack(">I", spi)                # id.spi (network order)
    info[76] = 50                                       # id.proto = ESP
    body = bytes(info) + bytes([1 if hard else 0]) + bytes(7)
    return struct.pack("=IHHII", 16 + len(body), typ, 0, 0, 0) + body


def test_expire_messages_are_parsed_from_the_kernels_layout():
    data = expire_msg(0x1234) + expire_msg(0x99, typ=0x10) + expire_msg(0xdeadbeef, hard=True)
    assert agent_xfrm.parse_expires(data) == [(0x1234, False), (0xdeadbeef, True)]
    # truncated or garbage datagrams yield nothing and never raise
    for bad in (b"", b"\x00" * 15, expire_msg(1)[:100], struct.pack("=IHHII", 8, 0x18, 0, 0, 0), os.urandom(300)):
        assert isinstance(agent_xfrm.parse_expires(bad), list)
    assert agent_xfrm.parse_expires(expire_msg(1)[:100]) == []


def test_the_expire_group_can_be_joined_on_this_kernel():
    if os.geteuid() != 0:
        pytest.skip("needs root")
    s = agent_xfrm.expire_socket()
    try:
        assert s.getsockname()[1] == 1 << (agent_xfrm.XFRMNLGRP_EXPIRE - 1)
    finally:
        s.close()


def test_states_carry_lifetimes_and_suites():
    c = agent_xfrm.xfrm_state_add(sa_cfg(0x1001, "198.51.100.7", "203.0.113.1", soft={"packets": 60, "bytes": 10000}, hard={"packets": 100, "seconds": 3600}))
    assert "spi 0x1001 " in c and "aead 'rfc4106(gcm(aes))' 0x000102030405060708090a0b0c0d0e0f10111213 128" in c
    assert "flag esn" in c and "replay-window 1024" in c
    for lim in ("limit packet-soft 60", "limit byte-soft 10000", "limit packet-hard 100", "limit time-hard 3600"):
        assert lim in c, c
    with pytest.raises(agent_base.AgentError, match="AEAD suites only"):
        agent_xfrm.xfrm_state_add(dict(sa_cfg(1, "a", "b"), cipher="AesCtrHmacMd5"))


class Recorder:
    def __init__(self, fail_on=None):
        self.cmds, self.fail_on = [], fail_on
        self.lock = threading.Lock()

    def __call__(self, cmd):
        with self.lock:
            if self.fail_on and self.fail_on in cmd:
                raise agent_base.AgentError(f"`{cmd}` failed: RTNETLINK answers: Protocol not supported")
            self.cmds.append(cmd)


def tunnel(out_spi, in_spi):
    me, gw = "198.51.100.7", "203.0.113.1"
    return {"inner": "10.9.0.1/32", "site": "10.1.0.0/16", "outbound": sa_cfg(out_spi, me, gw, soft={"packets": 60}),
            "inbound": sa_cfg(in_spi, gw, me, soft={"packets": 60})}


def wait_for(pred, timeout=5):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.01)
    return False


def test_soft_expire_renews_in_the_loss_free_order_and_down_removes_everything():
    rec = Recorder()
    be = agent_xfrm.Xfrm("rw0", run=rec)
    be.apply(tunnel(0x100, 0x200))
    assert [c.split(" spi ")[1].split()[0] for c in rec.cmds[:2]] == ["0x200", "0x100"], "inbound state first"
    assert any("dir out" in c for c in rec.cmds) and any(c.startswith("ip route add 10.1.0.0/16 dev rw0") for c in rec.cmds)

    kernel, ours = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    renewals = []
    spis = iter([(0x101, 0x201), (0x102, 0x202)])

    def renew():
        # as the agent does: ask, install, tell the controller, and drop the old inbound SA after a grace time
        out, inn = next(spis)
        renewals.append((out, inn))
        retire = be.install_renewal(tunnel(out, inn))
        assert not any("delete" in c and f"spi {inn - 1:#x}" in c for c in rec.cmds), "the old inbound state stays for now"
        agent_base.retire_after(0.2, retire)

    be.watch_lifetimes(renew, sock=ours)
    n = len(rec.cmds)
    kernel.send(expire_msg(0x999))                     # not ours: nothing happens
    time.sleep(0.2)
    assert renewals == [] and len(rec.cmds) == n
    kernel.send(expire_msg(0x100))                     # the outbound SA's soft limit
    assert wait_for(lambda: len(renewals) == 1)
    assert wait_for(lambda: any("delete" in c and "spi 0x200" in c for c in rec.cmds)), "the old inbound state goes after the grace time"
    new = rec.cmds[n:]
    adds = [c for c in new if c.startswith("ip xfrm state add")]
    assert [c.split(" spi ")[1].split()[0] for c in adds] == ["0x201", "0x101"], "new inbound before new outbound"
    order = [c.split(" spi ")[1].split()[0] + (" del" if "delete" in c else "") for c in new]
    assert order.index("0x100 del") > order.index("0x101"), "the old outbound state is removed after the new one is in"
    # a report about the SA just replaced does not renew again; one about the new inbound SA does
    kernel.send(expire_msg(0x100, hard=True))
    time.sleep(0.2)
    assert len(renewals) == 1
    kernel.send(expire_msg(0x201, hard=True))
    assert wait_for(lambda: len(renewals) == 2)
    assert wait_for(lambda: set(be.states) == {0x102, 0x202})

    n = len(rec.cmds)
    be.remove()
    gone = rec.cmds[n:]
    assert {c.split(" spi ")[1] for c in gone if "state delete" in c} == {"0x102", "0x202"}
    assert sum("policy delete" in c for c in gone) == 2 and any(c.startswith("ip addr del 10.9.0.1/32") for c in gone)
    kernel.close()


def test_a_failure_half_way_is_undone():
    rec = Recorder(fail_on="dir in")
    be = agent_xfrm.Xfrm("rw0", run=rec)
    with pytest.raises(agent_base.AgentError, match="Protocol not supported"):
        be.apply(tunnel(0x100, 0x200))
    n = len(rec.cmds)
    be.remove()
    gone = rec.cmds[n:]
    assert sorted(c.split(" spi ")[1] for c in gone if "state delete" in c) == ["0x100", "0x200"]
    assert [c for c in gone if "policy" in c] == ["ip xfrm policy delete src 10.9.0.1/32 dst 10.1.0.0/16 dir out"], "only what was applied"
    assert not any("addr del" in c or "route del" in c for c in gone)


def test_esp_in_udp_states_and_the_encap_socket():
    """A host profile with encap: udp gives SAs with udp_encap: their states carry `encap espinudp`, and the backend
    opens the socket the kernel receives ESP in UDP on (closed by remove), once, for the inbound SA's port; a real
    socket marked UDP_ENCAP_ESPINUDP can be opened on this kernel."""
    c = agent_xfrm.xfrm_state_add(dict(sa_cfg(0x1001, "198.51.100.7", "203.0.113.1"), udp_encap=[4500, 4500]))
    assert c.endswith("encap espinudp 4500 4500 0.0.0.0") or " encap espinudp 4500 4500 0.0.0.0 " in c, c
    assert "encap" not in agent_xfrm.xfrm_state_add(sa_cfg(0x1001, "198.51.100.7", "203.0.113.1"))

    opened = []

    class Sock:
        closed = False

        def close(self):
            self.closed = True

    def open_encap(address, port):
        opened.append((address, port))
        return Sock()

    rec = Recorder()
    be = agent_xfrm.Xfrm("rw0", run=rec, open_encap=open_encap)
    t = tunnel(0x100, 0x200)
    for d in ("outbound", "inbound"):
        t[d]["udp_encap"] = [4500, 4500]
    be.apply(t)
    assert opened == [("198.51.100.7", 4500)]
    assert sum("encap espinudp 4500 4500" in c for c in rec.cmds if c.startswith("ip xfrm state add")) == 2
    sock = be.encap_sock
    be.remove()
    assert sock.closed and be.encap_sock is None
    # plain ESP: no socket
    be = agent_xfrm.Xfrm("rw0", run=Recorder(), open_encap=open_encap)
    be.apply(tunnel(0x300, 0x400))
    assert len(opened) == 1
    be.remove()

    s = agent_xfrm.udp_encap_socket("127.0.0.1", 0)
    try:
        assert s.getsockopt(socket.IPPROTO_UDP, 100) == 2
    finally:
        s.close()
