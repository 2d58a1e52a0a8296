"""The `xfrm` backend of `p4sec-agent` (Linux kernel IPsec): the SAs as `ip xfrm` states (the profile's soft and
hard lifetimes as kernel limits) and policies, AEAD suites only; renewals on the kernel's XFRM_MSG_EXPIRE
notifications (a NETLINK_XFRM socket in the XFRMNLGRP_EXPIRE group); ESP in UDP received on a UDP_ENCAP socket."""
import socket
import struct
import subprocess
import sys
import threading

from p4sec.ipsec.agent_base import AgentError, start_renewer


XFRM_ALGS = {"AesGcm128": "rfc4106(gcm(aes))", "AesGcm256": "rfc4106(gcm(aes))", "ChaCha20Poly1305": "rfc7539esp(chacha20,poly1305)"}


def xfrm_state_add(sa_cfg):
    """`ip xfrm state add` for one SA, with its lifetimes as the kernel's soft and hard limits."""
    src, dst = sa_cfg["tunnel"]
    a = XFRM_ALGS.get(sa_cfg["cipher"])
    if a is None:
        raise AgentError(f"the xfrm backend here supports AEAD suites only, not {sa_cfg['cipher']}")
    key = bytes(sa_cfg["enc_key"]).hex()
    cmd = (f"ip xfrm state add src {src} dst {dst} proto esp spi {sa_cfg['spi']:#x} reqid 1 mode tunnel "
           f"aead '{a}' 0x{key} 128 replay-window {sa_cfg['replay_window']}")
    if sa_cfg.get("esn"):
        cmd += " flag esn"
    if sa_cfg.get("udp_encap"):
        sport, dport = sa_cfg["udp_encap"]
        cmd += f" encap espinudp {sport} {dport} 0.0.0.0"
    limits = []
    for kind in ("soft", "hard"):
        lim = sa_cfg.get(kind) or {}
        for field, name in (("packets", "packet"), ("bytes", "byte"), ("seconds", "time")):
            if lim.get(field):
                limits.append(f"{name}-{kind} {int(lim[field])}")
    if limits:
        cmd += " limit " + " limit ".join(limits)
    return cmd


def xfrm_state_delete(sa_cfg):
    src, dst = sa_cfg["tunnel"]
    return f"ip xfrm state delete src {src} dst {dst} proto esp spi {sa_cfg['spi']:#x}"


def xfrm_commands(sa, wan):
    """The Linux XFRM configuration of the same SAs (for hosts whose kernel has ESP)."""
    cmds = [xfrm_state_add(sa["inbound"]), xfrm_state_add(sa["outbound"])]
    inner, site = sa["inner"], sa["site"]
    me, gw = sa["outbound"]["tunnel"]
    cmds.append(f"ip xfrm policy add src {inner} dst {site} dir out tmpl src {me} dst {gw} proto esp reqid 1 mode tunnel")
    cmds.append(f"ip xfrm policy add src {site} dst {inner} dir in tmpl src {gw} dst {me} proto esp reqid 1 mode tunnel")
    cmds.append(f"ip addr add {inner} dev lo")
    cmds.append(f"ip route add {site} dev {wan} src {inner.split('/')[0]}")
    return cmds


# the kernel's XFRM netlink interface (include/uapi/linux/xfrm.h, netlink.h)
NETLINK_XFRM = 6
XFRMNLGRP_EXPIRE = 2
XFRM_MSG_EXPIRE = 0x18
NLMSG_HDRLEN = 16
# struct xfrm_user_expire = struct xfrm_usersa_info (224 bytes: selector 56, id {daddr 16, spi be32, proto}
# at 56, ...) followed by __u8 hard
EXPIRE_SPI_OFFSET = 56 + 16
EXPIRE_HARD_OFFSET = 224


def parse_expires(data):
    """(spi, hard) of every XFRM_MSG_EXPIRE message in one netlink datagram; other messages and truncated ones
    are skipped."""
    found = []
    off = 0
    while off + NLMSG_HDRLEN <= len(data):
        length, typ = struct.unpack_from("=IH", data, off)
        if length < NLMSG_HDRLEN or off + length > len(data):
            break
        if typ == XFRM_MSG_EXPIRE and length >= NLMSG_HDRLEN + EXPIRE_HARD_OFFSET + 1:
            spi = struct.unpack_from(">I", data, off + NLMSG_HDRLEN + EXPIRE_SPI_OFFSET)[0]
            found.append((spi, data[off + NLMSG_HDRLEN + EXPIRE_HARD_OFFSET] != 0))
        off += (length + 3) & ~3
    return found


def expire_socket():
    """A NETLINK_XFRM socket that receives the kernel's SA expire notifications."""
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_XFRM)
    s.bind((0, 1 << (XFRMNLGRP_EXPIRE - 1)))
    return s


def udp_encap_socket(address, port):
    """A UDP socket on `port` (of `address`'s family) marked for ESP in UDP (UDP_ENCAP_ESPINUDP): the kernel hands
    the ESP it receives there to XFRM instead of the socket, as it needs for UDP-encapsulated SAs to receive."""
    six = ":" in address
    s = socket.socket(socket.AF_INET6 if six else socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("::" if six else "0.0.0.0", port))
        s.setsockopt(socket.IPPROTO_UDP, 100, 2)    # UDP_ENCAP, UDP_ENCAP_ESPINUDP (linux/udp.h)
    except OSError as e:
        s.close()
        raise AgentError(f"cannot open the ESP-in-UDP socket on port {port}: {e}") from e
    return s


class Xfrm:
    """The SAs applied to the host's kernel (Linux XFRM), renewed when the kernel reports their soft lifetime.
    `run` executes one command (default: a shell; tests pass their own, this machine's kernel has no ESP);
    `open_encap(address, port)` opens the socket ESP in UDP arrives on (default: udp_encap_socket; with `run`
    given: none unless passed too)."""

    def __init__(self, wan, run=None, open_encap=None):
        self.wan = wan
        self.open_encap = open_encap or (udp_encap_socket if run is None else None)
        self.run = run or self._run
        self.sa = None
        self.sock = None
        self.encap_sock = None
        self.states = {}    # spi -> SA config of the states installed now
        self.undo = []      # how to undo the policies, address and route applied (in order)

    @staticmethod
    def _run(cmd):
        r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
        if r.returncode:
            raise AgentError(f"`{cmd}` failed: {r.stderr.strip()} (does this kernel have ESP? try --backend userspace)")

    def apply(self, sa):
        """States, policies, the inner address and the route; what was applied is undone by remove(), also after
        a failure half-way."""
        inner, site = sa["inner"], sa["site"]
        self.sa = {"inner": inner, "site": site, "outbound": sa["outbound"], "inbound": sa["inbound"]}
        if sa["inbound"].get("udp_encap") and self.open_encap and self.encap_sock is None:
            self.encap_sock = self.open_encap(sa["inbound"]["tunnel"][1], sa["inbound"]["udp_encap"][1])
        undo = [f"ip xfrm policy delete src {inner} dst {site} dir out", f"ip xfrm policy delete src {site} dst {inner} dir in",
                f"ip addr del {inner} dev lo", f"ip route del {site} dev {self.wan}"]
        for c in xfrm_commands(sa, self.wan):
            self.run(c)
            if c.startswith("ip xfrm state add"):
                cfg = sa["inbound"] if f"spi {sa['inbound']['spi']:#x} " in c else sa["outbound"]
                self.states[cfg["spi"]] = cfg
            else:
                self.undo.append(undo[len(self.undo)])

    def watch_lifetimes(self, renew, sock=None):
        """Call renew() when the kernel reports the soft (or hard) lifetime of the current SAs; several reports
        while one renewal runs lead to one renewal."""
        import queue
        self.sock = sock or expire_socket()
        self.events = queue.Queue()

        def reader():
            while True:
                try:
                    data = self.sock.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    self.events.put(None)
                    return
                cur = self.sa
                if cur and any(spi in (cur["outbound"]["spi"], cur["inbound"]["spi"]) for spi, _ in parse_expires(data)):
                    self.events.put(True)

        threading.Thread(target=reader, daemon=True).start()
        self.renewer = start_renewer(self.events, renew)

    def install_renewal(self, sa):
        """The new inbound state first, then the new outbound state (the kernel prefers it to the old one, which
        reached its soft limit) and the old outbound state removed. Returns the removal of the old inbound state,
        for the caller to run once the gateway sends under the new one."""
        old = self.sa
        for cfg in (sa["inbound"], sa["outbound"]):
            self.run(xfrm_state_add(cfg))
            self.states[cfg["spi"]] = cfg
        self.sa = dict(old, outbound=sa["outbound"], inbound=sa["inbound"])
        self._delete_state(old["outbound"])
        return lambda: self._delete_state(old["inbound"])

    def _delete_state(self, cfg):
        if self.states.pop(cfg["spi"], None) is not None:
            self.run(xfrm_state_delete(cfg))

    def remove(self):
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.sock.close()
        if self.encap_sock is not None:
            self.encap_sock.close()
            self.encap_sock = None
        for cfg in list(self.states.values()):
            try:
                self._delete_state(cfg)
            except AgentError as e:
                print(f"p4sec-agent: {e}", file=sys.stderr, flush=True)
        while self.undo:
            try:
                self.run(self.undo.pop())
            except AgentError as e:
                print(f"p4sec-agent: {e}", file=sys.stderr, flush=True)
        self.sa = None
