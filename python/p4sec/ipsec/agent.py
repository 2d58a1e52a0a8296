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

This module is the command line and the controller's client; the backends are p4sec.ipsec.agent_userspace and
p4sec.ipsec.agent_xfrm, what they share p4sec.ipsec.agent_base.
"""
import argparse
import json
import pathlib
import signal
import sys
import threading
import time

from p4sec.infra.netns import CommandError, sh
from p4sec.ipsec.agent_base import GRACE, AgentError, retire_after
from p4sec.ipsec.agent_userspace import ROOT, Userspace
from p4sec.ipsec.agent_xfrm import Xfrm, xfrm_commands


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
    """(address, MAC) of interface `iface`: its first address that is not link-local."""
    try:
        mac = pathlib.Path(f"/sys/class/net/{iface}/address").read_text().strip()
    except OSError as e:
        raise AgentError(f"no interface {iface}") from e
    for line in sh("ip", "-o", "addr", "show", "dev", iface).stdout.splitlines():
        parts = line.split()
        if parts[2] in ("inet", "inet6") and not parts[3].startswith("fe80"):
            return parts[3].split("/")[0], mac
    raise AgentError(f"{iface} has no address")


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
