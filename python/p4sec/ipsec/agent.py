"""`p4sec-agent`: the road-warrior side of a host-to-site tunnel. It talks to the controller over gRPC with mutual
TLS (certificates from `p4sec-ca`), lists the tunnel profiles it may use, and brings one up by applying the SAs
the controller hands out to this host.

    p4sec-agent --controller ADDR --ca CA.crt --cert ME.crt --key ME.key list
    p4sec-agent ... up PROFILE --wan IFACE [--gateway-mac MAC] [--tun NAME] [--backend userspace]
    p4sec-agent ... down PROFILE

Backend `userspace` (hosts without kernel ESP, like this machine's kernel): the agent runs p4sec itself with
programs/ipsec_gateway.p4, port 1 a TUN device it creates (the host's side: the inner address is put on it and the
site's prefix routed into it), port 2 the WAN interface; it programs that switch over P4Runtime with the SAs
(SAD-dec first), then tells the controller it is ready so the site's gateway starts sending. `up` stays in the
foreground until SIGINT/SIGTERM, then takes the tunnel down. Backend `xfrm` (Linux kernel IPsec) applies the same
SAs as `ip xfrm` states (with the profile's soft and hard lifetimes as kernel limits) and policies (AEAD suites;
`--dry-run` prints the commands instead); on a kernel without ESP the first command fails with the kernel's
message. Both backends renew: the userspace one on its switch's lifetime digests, the xfrm one on the kernel's
XFRM_MSG_EXPIRE notifications (a NETLINK_XFRM socket in the XFRMNLGRP_EXPIRE group).
"""
import argparse
import json
import pathlib
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

from p4sec.infra.netns import CommandError, free_port, sh

ROOT = pathlib.Path(__file__).resolve().parents[3]
HOST_MAC = "02:00:00:00:00:01"


class AgentError(Exception):
    pass


GRACE = 1.0     # seconds an old inbound SA stays after the gateway switched to the new one (packets in flight)


def start_renewer(events, renew):
    """A thread that calls renew() for each report put in `events` (reports that pile up while one renewal runs
    lead to one renewal) until None is put."""
    def run():
        while True:
            if events.get() is None:
                return
            while not events.empty():
                if events.get_nowait() is None:
                    return
            try:
                renew()
            except AgentError as e:
                print(f"p4sec-agent: renewal failed: {e}", file=sys.stderr, flush=True)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def retire_after(seconds, retire):
    """Run retire() after `seconds` in the background; its failure is reported, never raised."""
    def run():
        try:
            retire()
        except Exception as e:
            print(f"p4sec-agent: removing the old inbound SA failed: {e}", file=sys.stderr, flush=True)
    t = threading.Timer(seconds, run)
    t.daemon = True
    t.start()
    return t


class Controller:
    """The controller's agent endpoint (gRPC service p4sec.Agent, JSON messages, mutual TLS): any replica of a
    highly available controller (a follower forwards the call to the leader)."""

    RETRY = 10.0

    def __init__(self, address, ca, cert, key, server_name="controller"):
        import grpc
        self.grpc = grpc
        try:
            creds = grpc.ssl_channel_credentials(pathlib.Path(ca).read_bytes(), pathlib.Path(key).read_bytes(), pathlib.Path(cert).read_bytes())
        except OSError as e:
            raise AgentError(f"cannot read the TLS files: {e}") from e
        self.channel = grpc.secure_channel(address, creds, options=[("grpc.ssl_target_name_override", server_name)])

    def call(self, method, **req):
        """One call; UNAVAILABLE (no replica leads for a moment, the controller restarts) is retried for up to
        `RETRY` seconds, so a call made while the leader changes lands on the next one."""
        rpc = self.channel.unary_unary(f"/p4sec.Agent/{method}", request_serializer=lambda o: json.dumps(o).encode(),
                                       response_deserializer=lambda b: json.loads(b))
        end = time.monotonic() + self.RETRY
        while True:
            try:
                return rpc(req, timeout=30)
            except self.grpc.RpcError as e:
                if e.code() != self.grpc.StatusCode.UNAVAILABLE or time.monotonic() >= end:
                    raise AgentError(f"{method}: {e.code().name}: {e.details()}") from e
                time.sleep(0.25)

    def close(self):
        self.channel.close()


def iface_info(iface):
    try:
        mac = pathlib.Path(f"/sys/class/net/{iface}/address").read_text().strip()
    except OSError as e:
        raise AgentError(f"no interface {iface}") from e
    for line in sh("ip", "-o", "addr", "show", "dev", iface).stdout.splitlines():
        parts = line.split()
        if parts[2] in ("inet", "inet6") and not parts[3].startswith("fe80"):
            return parts[3].split("/")[0], mac
    raise AgentError(f"{iface} has no address")



class Userspace:
    """The SAs applied to a local p4sec switch: port 1 = TUN (host side), port 2 = the WAN interface."""

    def __init__(self, p4sec, wan, tun, gateway_mac):
        self.p4sec, self.wan, self.tun, self.gateway_mac = p4sec, wan, tun, gateway_mac
        self.proc = None
        self.switch = None

    def apply(self, sa):
        from p4sec.ipsec import gateway as gwp
        from p4sec.infra import runtime
        work = pathlib.Path(tempfile.mkdtemp(prefix="p4sec-agent-"))
        r = subprocess.run([self.p4sec, "compile", str(ROOT / "programs" / "ipsec_gateway.p4"), "-o", str(work / "gw")], capture_output=True, text=True)
        if r.returncode:
            raise AgentError(f"compiling the gateway program failed: {r.stderr}")
        port = free_port()
        self.proc = subprocess.Popen([self.p4sec, "switch", "--grpc", f"127.0.0.1:{port}", "--port", f"1=tun:{self.tun}", "--port", f"2={self.wan}"],
                                     stderr=open(work / "switch.log", "w"))
        deadline = time.time() + 10
        while not pathlib.Path(f"/sys/class/net/{self.tun}").exists():
            if self.proc.poll() is not None or time.time() > deadline:
                raise AgentError("the local p4sec switch did not start: " + (work / "switch.log").read_text()[-500:])
            time.sleep(0.05)
        s = self.switch = runtime.Switch(f"127.0.0.1:{port}")
        s.push(work / "gw")
        out, inn = sa["outbound"], sa["inbound"]
        me, gw = out["tunnel"][0], out["tunnel"][1]
        inner = sa["inner"]
        site = sa["site"]
        self.selectors = (site, inner)     # what the inbound SAs may carry: the site to this host
        # SAD-dec first (slot 1, with its selectors), then SAD-enc (slot 0) and the policy
        with s.batch():
            gwp.local_addr_insert(s, me)
            gwp.wan_port_insert(s, 2)
            gwp.sa_write(s, 1, inn)
            gwp.selectors_write(s, 1, *self.selectors)
            gwp.sad_dec_write(s, gw, me, inn["spi"], 1)
            # routes: the gateway out of the WAN port, the inner address into the TUN port
            for prefix, port_no, mac in ((gw + ("/128" if gwp.version(gw) == 6 else "/32"), 2, self.gateway_mac), (inner, 1, HOST_MAC)):
                gwp.route_write(s, prefix, mac, HOST_MAC, port_no)
        with s.batch():
            gwp.sa_write(s, 0, out)
            s.table_insert(gwp.spd(gwp.version(site)), gwp.spd_match(inner, site), gwp.PROTECT, {gwp.SA_INDEX: 0}, priority=10)
        # the host side: the inner address on the TUN device, the site routed into it
        sh("ip", "link", "set", self.tun, "up")
        sh("ip", "addr", "add", inner, "dev", self.tun)
        sh("ip", "route", "add", site, "dev", self.tun)

        self.me, self.gw = me, gw
        self.in_slot, self.in_spi, self.next_slot, self.out_spi = 1, inn["spi"], 2, out["spi"]

    def _sad_dec(self, spi, slot, insert=True):
        """The SAD-dec entry of an inbound SA and its selectors (inserted before the entry, deleted after it)."""
        from p4sec.ipsec import gateway as gwp
        if insert:
            gwp.selectors_write(self.switch, slot, *self.selectors)
        gwp.sad_dec_write(self.switch, self.gw, self.me, spi, slot, insert)
        if not insert:
            gwp.selectors_write(self.switch, slot, *self.selectors, insert=False)

    def watch_lifetimes(self, renew):
        """Renew when the local SAs report their soft (or hard) lifetime: renew() asks the controller and calls
        install_renewal with its answer."""
        import queue
        from p4sec.ipsec import gateway as gwp
        self.events = queue.Queue()

        def on_digest(name, items):
            if name == gwp.SA_EVENT_DIGEST and any(it[2] in (self.out_spi, self.in_spi) for it in items):
                self.events.put(True)

        self.switch.on_digest = on_digest
        self.switch.digest_enable(gwp.SA_EVENT_DIGEST)
        start_renewer(self.events, renew)

    def install_renewal(self, sa):
        """The new inbound SA first (a new slot and SAD-dec entry), then the outbound SA swapped in place. Returns
        the removal of the old inbound SA, for the caller to run once the gateway sends under the new one."""
        from p4sec.ipsec import gateway as gwp
        slot = self.next_slot
        self.next_slot = 2 + (self.next_slot - 1) % 30
        with self.switch.batch():
            gwp.sa_write(self.switch, slot, sa["inbound"])
            self._sad_dec(sa["inbound"]["spi"], slot)
        gwp.sa_write(self.switch, 0, sa["outbound"])
        self.out_spi = sa["outbound"]["spi"]
        old_slot, old_spi = self.in_slot, self.in_spi
        self.in_slot, self.in_spi = slot, sa["inbound"]["spi"]

        def retire():
            with self.switch.batch():
                self._sad_dec(old_spi, old_slot, insert=False)
                gwp.sa_delete(self.switch, old_slot)
        return retire

    def remove(self):
        if getattr(self, "events", None) is not None:
            self.events.put(None)
        if self.switch is not None:
            self.switch.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


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


def main(argv=None):
    ap = argparse.ArgumentParser(prog="p4sec-agent", description=__doc__.split("\n\n")[0],
                                 epilog="example: p4sec-agent --controller gw.example:50051 --ca ca/ca.crt --cert "
                                        "alice.crt --key alice.key up office --wan eth0 (docs/ipsec.md, road warriors)")
    ap.add_argument("--controller", required=True, metavar="ADDR",
                    help="the controller's agent endpoint (its config's agents.listen): HOST:PORT or unix:PATH")
    ap.add_argument("--ca", required=True, metavar="FILE", help="the p4sec CA's certificate (p4sec-ca init DIR: DIR/ca.crt)")
    ap.add_argument("--cert", required=True, metavar="FILE", help="this client's certificate (p4sec-ca issue DIR NAME: NAME.crt)")
    ap.add_argument("--key", required=True, metavar="FILE", help="this client's private key (NAME.key, next to its certificate)")
    ap.add_argument("--server-name", default="controller", help="the name in the controller's certificate [default: controller]")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    sub.add_parser("list", help="the host profiles this client may use")
    u = sub.add_parser("up", help="bring a host profile up and keep it up (renewals) until Ctrl-C")
    u.add_argument("profile", help="the host profile (controller config: host_profiles)")
    u.add_argument("--wan", required=True, help="the interface towards the site's gateway")
    u.add_argument("--gateway-mac", default="02:00:00:00:00:01", help="next-hop MAC towards the gateway")
    u.add_argument("--tun", default="p4sec0", help="userspace backend: the TUN device to create [default: p4sec0]")
    u.add_argument("--backend", choices=["userspace", "xfrm"], default="userspace",
                   help="userspace: a p4sec switch on a TUN device (any kernel); xfrm: the kernel's IPsec (ip xfrm) "
                        "[default: userspace]")
    u.add_argument("--dry-run", action="store_true", help="xfrm: print the commands instead of running them")
    u.add_argument("--p4sec", default=str(ROOT / "target" / "release" / "p4sec"),
                   help="userspace backend: the p4sec binary [default: the checkout's target/release/p4sec]")
    d = sub.add_parser("down", help="tear a host profile down (the gateway's SAs for this host)")
    d.add_argument("profile", help="the host profile")
    a = ap.parse_args(argv)
    ctl = None
    try:
        ctl = Controller(a.controller, a.ca, a.cert, a.key, a.server_name)
        if a.cmd == "list":
            r = ctl.call("List")
            print(f"{r['client']}: " + (", ".join(r["profiles"]) or "(no profiles)"))
            return 0
        if a.cmd == "down":
            print(json.dumps(ctl.call("Down", profile=a.profile)))
            return 0
        address, mac = iface_info(a.wan)
        sa = ctl.call("Up", profile=a.profile, address=address, mac=mac)
        if a.backend == "xfrm" and a.dry_run:
            try:
                print("\n".join(xfrm_commands(sa, a.wan)))
            finally:
                ctl.call("Down", profile=a.profile)
            return 0
        be = Xfrm(a.wan) if a.backend == "xfrm" else Userspace(a.p4sec, a.wan, a.tun, a.gateway_mac)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        try:
            be.apply(sa)
            ctl.call("Ready", profile=a.profile)
            print(f"up: {sa['tunnel']} inner {sa['inner']} -> site {sa['site']} via {sa['gateway']} ({sa['suite']})", flush=True)

            def renew():
                new = ctl.call("Renew", profile=a.profile)
                retire_old_inbound = be.install_renewal(new)
                # the old inbound SA stays until the gateway sends under the new one (if RenewReady fails, the
                # gateway keeps the old one, and so does this host)
                ctl.call("RenewReady", profile=a.profile)
                retire_after(GRACE, retire_old_inbound)
                print(f"renewed: outbound {new['outbound']['spi']:#010x}, inbound {new['inbound']['spi']:#010x}", flush=True)

            be.watch_lifetimes(renew)
            stop.wait()
            print(f"p4sec-agent: stopping (signal): taking {a.profile} down", flush=True)
        finally:
            be.remove()
            try:
                ctl.call("Down", profile=a.profile)
            except AgentError:
                pass
        print(f"p4sec-agent: {a.profile} is down", flush=True)
        return 0
    except (AgentError, CommandError) as e:
        print(f"p4sec-agent: {e}", file=sys.stderr)
        return 1
    finally:
        if ctl is not None:
            ctl.close()


if __name__ == "__main__":
    sys.exit(main())
