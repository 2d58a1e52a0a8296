"""The `userspace` backend of `p4sec-agent` (hosts without kernel ESP): the agent runs a p4sec switch with
programs/ipsec_gateway.p4, port 1 a TUN device it creates (the host's side), port 2 the WAN interface, and
programs the SAs into it over P4Runtime (SAD-dec first); it renews on the switch's lifetime digests."""
import pathlib
import subprocess
import tempfile
import time

from p4sec.infra.netns import free_port, sh
from p4sec.ipsec.agent_base import AgentError, start_renewer

ROOT = pathlib.Path(__file__).resolve().parents[3]
HOST_MAC = "02:00:00:00:00:01"


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
