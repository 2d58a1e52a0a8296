"""The IPsec controller's basics, shared by p4sec.ipsec.controller and its parts (sites, hosts, reconcile):
cipher suites, the SA configuration, a gateway, a host's name prefix, the controller's error, routes, an inbound
SA's selectors, and the named checkpoints of its multi-step operations."""
import os
import signal

from p4sec.ipsec import gateway as gwp

CRASH_AT = os.environ.get("P4SEC_CRASH_AT")


def checkpoint(step):
    """A named step of a multi-step operation, passed once its writes are done. With P4SEC_CRASH_AT=step the
    process kills itself there (SIGKILL: no clean-up runs), for the fault tests, which find every step by reading
    the package's calls of checkpoint()."""
    if CRASH_AT == step:
        os.kill(os.getpid(), signal.SIGKILL)

# cipher suite -> (cipher, integrity, key material bytes, integrity key bytes)
SUITES = {
    "null": ("Null", "HmacSha256_128", 0, 32),
    "aes-ctr-hmac-sha256": ("AesCtr128", "HmacSha256_128", 20, 32),
    "aes-ctr-hmac-md5": ("AesCtr128", "HmacMd5_96", 20, 16),
    "aes-cbc-hmac-sha256": ("AesCbc128", "HmacSha256_128", 16, 32),
    "aes-gcm-128": ("AesGcm128", "None", 20, 0),
    "aes-gcm-256": ("AesGcm256", "None", 36, 0),
    "chacha20-poly1305": ("ChaCha20Poly1305", "None", 36, 0),
}
SWITCH_MAC = "02:00:00:00:00:01"
SA_EVENT_DIGEST = gwp.SA_EVENT_DIGEST
SOFT, HARD = 1, 2
HOST = "host:"      # the name prefix of a road warrior (a host-to-site tunnel's b side, its SAs' end)


class ControllerError(Exception):
    pass


class Gateway:
    def __init__(self, name, switch, address, lan_prefix, lan_port, lan_mac, wan_port, wan_mac, wan_prefix):
        self.name, self.switch, self.address = name, switch, address
        self.lan_prefix, self.lan_port, self.lan_mac = lan_prefix, lan_port, lan_mac
        self.wan_port, self.wan_mac, self.wan_prefix = wan_port, wan_mac, wan_prefix
        self.free_slots = []
        self.next_slot = 0

    def setup(self, program_dir):
        s = self.switch
        s.push(program_dir)
        gwp.local_addr_insert(s, self.address)
        gwp.wan_port_insert(s, self.wan_port)   # clear traffic from the WAN is never protected
        for prefix, mac, port in ((self.lan_prefix, self.lan_mac, self.lan_port), (self.wan_prefix, self.wan_mac, self.wan_port)):
            _lpm(s, prefix, mac, port)

    def alloc_slot(self):
        if self.free_slots:
            return self.free_slots.pop()
        slot = self.next_slot
        self.next_slot += 1
        return slot

    def release_slot(self, slot):
        """Give back a slot found empty (reconciliation removed its SA): only one handed out before and not free
        already."""
        if slot < self.next_slot and slot not in self.free_slots:
            self.free_slots.append(slot)


# ESP in UDP (RFC 3948): the ports of the UDP datagrams (source, destination); programs/ipsec_gateway.p4 takes UDP
# to this destination port for ESP (its UDP_ENCAP_PORT)
UDP_ENCAP_PORTS = (4500, 4500)


def sa_config(spi, suite, keymat, authkey, src, dst, soft=None, hard=None, udp_encap=None):
    """The esp_sad configuration of an SA (add_sa); `udp_encap`: (source, destination) UDP ports to send its
    packets in, and to expect them in (ESP in UDP), or None for plain ESP."""
    cipher, integ, _, _ = SUITES[suite]
    null = {"packets": None, "bytes": None, "seconds": None}
    cfg = {"spi": spi, "cipher": cipher, "integ": integ, "enc_key": list(keymat), "auth_key": list(authkey), "esn": True,
           "replay_window": 1024, "tunnel": [src, dst], "soft": dict(null, **(soft or {})), "hard": dict(null, **(hard or {})),
           "initial_seq": 0}
    if udp_encap:
        cfg["udp_encap"] = list(udp_encap)
    return cfg


def _lpm(switch, prefix, mac=None, port=None, insert=True):
    """The route for a prefix of either IP version (out of `port` to `mac`)."""
    gwp.route_write(switch, prefix, mac, SWITCH_MAC, port, insert)


def sa_selectors(src, dst, gateways, sites=None, inner=None):
    """The selectors of an inbound SA from `src` (a gateway's or a host's name) to the gateway `dst`: the (inner
    source, inner destination) prefixes of what it decrypts (sa_selectors: anything else is dropped and counted as
    SELECTOR_MISMATCH). A host tunnel (`inner`: the host's inner address): that address to dst's site; a site-to-site
    tunnel: its prefixes behind each gateway (`sites`: name -> prefix; default: their sites). None if unknown (an SA
    without selectors decrypts nothing that is delivered). Derived from the store, so that the controller's writes,
    its removals and reconciliation agree on them."""
    if inner:
        return inner, dst.lan_prefix
    sites = sites or {}
    src_gw = gateways.get(src)
    sp = sites.get(src) or (src_gw.lan_prefix if src_gw else None)
    dp = sites.get(dst.name) or dst.lan_prefix
    return (sp, dp) if sp and dp else None
