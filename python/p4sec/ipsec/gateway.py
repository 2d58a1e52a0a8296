"""The names in programs/ipsec_gateway.p4 that its control planes (the controller, the agent) write to: tables,
actions and their parameters, match fields, the SA extern instance and its operations, the lifetime digest. One
place, so a renamed table or parameter is changed once; `tables`, `actions`, ... list them for a check against
the program's P4Info (tests/ipsec/test_gateway_names.py).

Tables and actions that exist once per IP version are functions of the version (4 or 6)."""
import functools

from p4sec.infra import runtime

CONTROL = "GwIngress"

# actions
TO_ME = f"{CONTROL}.to_me"
PROTECT = f"{CONTROL}.protect"            # (sa_index): encrypt under the SA in that slot
BYPASS = f"{CONTROL}.bypass"
DEC_SA = f"{CONTROL}.dec_sa"              # (sa_index): decrypt with the SA in that slot
SA_INDEX = "sa_index"                     # the parameter of protect and dec_sa
FROM_WAN = f"{CONTROL}.from_wan"          # port_side: the port is a WAN port
SELECTOR_OK = f"{CONTROL}.selector_ok"    # sa_selectors: the decrypted packet is inside its SA's selectors
NHOP_PARAMS = ("dst_mac", "src_mac", "port")

# the SA extern (esp_sad): SAs live in its slots, written with add_sa ({"index", "sa"}; delete: {"index"})
SAD = f"{CONTROL}.sad"
ADD_SA = "add_sa"
SA_STATS = "sa_stats"
SA_COUNTERS = f"{CONTROL}.sa_counters"
SA_EVENT_DIGEST = "sa_event_t"            # soft/hard lifetime events: [kind, slot, spi]

ESP_SPI = "meta.esp.spi"

# the side of a port: WAN ports are listed, clear traffic arriving on them is never protected
PORT_SIDE = f"{CONTROL}.port_side"
INGRESS_PORT = "sm.ingress_port"
# counters: packets dropped on the WAN side (index WAN_DENIED, WAN_SPOOFED), per ESP status (SELECTOR_MISMATCH)
WAN_DROPS = f"{CONTROL}.wan_drops"
WAN_DENIED, WAN_SPOOFED = 0, 1
ESP_STATUS = f"{CONTROL}.esp_status"
SELECTOR_MISMATCH = 12
SA_SLOT = "meta.sa_index"


def version(address):
    """4 or 6: the IP version of an address or prefix."""
    return 6 if runtime.is_v6(address) else 4


def _v(name, v):
    return f"{CONTROL}.{name}{'6' if v == 6 else ''}"


def local_addr(v):
    """The table of the gateway's own addresses (action TO_ME)."""
    return _v("local_addr", v)


def lpm(v):
    """The routing table (action set_nhop(v))."""
    return f"{CONTROL}.ipv{v}_lpm"


def set_nhop(v):
    return _v("set_nhop", v)


def spd(v):
    """The security policy table: ternary source and destination, action PROTECT or BYPASS, with a priority."""
    return _v("spd", v)


def sad_dec(v):
    """The inbound SA table: exact outer source, destination and SPI, action DEC_SA."""
    return _v("sad_dec", v)


def sa_selectors(v):
    """The selectors of the inbound SAs (v: of the inner packets): exact slot, ternary inner source,
    destination and protocol, action SELECTOR_OK (selector_ports adds port ranges), with a priority."""
    return _v("sa_selectors", v)


def proto(v):
    return "hdr.ipv4.protocol" if v == 4 else "hdr.ipv6.next_hdr"


def src_addr(v):
    return f"hdr.ipv{v}.src_addr"


def dst_addr(v):
    return f"hdr.ipv{v}.dst_addr"


def tables():
    return [f(v) for f in (local_addr, lpm, spd, sad_dec, sa_selectors) for v in (4, 6)] + [PORT_SIDE]


def actions():
    return [TO_ME, PROTECT, BYPASS, DEC_SA, FROM_WAN, SELECTOR_OK, set_nhop(4), set_nhop(6)]


# ---------------------------------------------------------------------------------------------- SA slots

def sa_write(switch, slot, sa):
    """Write the SA configuration `sa` into `slot` (a new SA, or one replaced in place)."""
    switch.extern_write(SAD, ADD_SA, {"index": slot, "sa": sa})


def sa_delete(switch, slot):
    """Remove the SA in `slot`."""
    switch.extern_write(SAD, ADD_SA, {"index": slot}, delete=True)


def sa_stats(switch, slot):
    """The SA's counters and lifetime state (a dict), or None."""
    return switch.extern_read(SAD, SA_STATS, {"index": slot})


# ---------------------------------------------------------------------------------------------- entries

def sad_dec_match(src_address, dst_address, spi):
    """The SAD-dec key of an SA from `src_address` to `dst_address` (outer addresses) with this SPI."""
    v = version(dst_address)
    return {src_addr(v): ("exact", runtime.addr(src_address)), dst_addr(v): ("exact", runtime.addr(dst_address)),
            ESP_SPI: ("exact", spi.to_bytes(4, "big"))}


def sad_dec_write(switch, src_address, dst_address, spi, slot, insert=True):
    """Insert (or delete) the SAD-dec entry that sends the SA's packets to `slot`."""
    table, match = sad_dec(version(dst_address)), sad_dec_match(src_address, dst_address, spi)
    if insert:
        switch.table_insert(table, match, DEC_SA, {SA_INDEX: slot})
    else:
        switch.table_delete(table, match)


def local_addr_insert(switch, address):
    v = version(address)
    switch.table_insert(local_addr(v), {dst_addr(v): ("exact", runtime.addr(address))}, TO_ME, {})


@functools.lru_cache(maxsize=1 << 16)
def prefix_match(prefix):
    """(value, mask) of a prefix "net/len" for a ternary field."""
    net, plen = prefix.split("/")
    return runtime.addr(net), runtime.prefix_mask(int(plen), 128 if runtime.is_v6(prefix) else 32)


def spd_match(src_prefix, dst_prefix):
    """The SPD key for traffic from `src_prefix` to `dst_prefix` (same IP version)."""
    v = version(src_prefix)
    return {src_addr(v): ("ternary", *prefix_match(src_prefix)), dst_addr(v): ("ternary", *prefix_match(dst_prefix))}


def route_write(switch, prefix, dst_mac=None, src_mac=None, port=None, insert=True):
    """The route for a prefix of either IP version: out of `port`, from `src_mac` to `dst_mac` (MAC strings)."""
    net, plen = prefix.split("/")
    v = version(prefix)
    match = {dst_addr(v): ("lpm", runtime.addr(net), int(plen))}
    if insert:
        switch.table_insert(lpm(v), match, set_nhop(v), {"dst_mac": runtime.mac(dst_mac), "src_mac": runtime.mac(src_mac), "port": port})
    else:
        switch.table_delete(lpm(v), match)


def wan_port_match(port):
    """The port_side key of `port`."""
    return {INGRESS_PORT: ("exact", port.to_bytes(2, "big"))}


def wan_port_insert(switch, port):
    """Mark `port` as a WAN port: clear traffic arriving there is never protected (only ESP and bypass pass)."""
    switch.table_insert(PORT_SIDE, wan_port_match(port), FROM_WAN, {})


SELECTOR_PRIORITY = 10


def selectors_match(slot, src_prefix, dst_prefix):
    """The sa_selectors key of the inbound SA in `slot` for inner packets from `src_prefix` to `dst_prefix`."""
    v = version(src_prefix)
    return {SA_SLOT: ("exact", slot.to_bytes(4, "big")), src_addr(v): ("ternary", *prefix_match(src_prefix)),
            dst_addr(v): ("ternary", *prefix_match(dst_prefix))}


def selectors_write(switch, slot, src_prefix, dst_prefix, insert=True):
    """Insert (or delete) the selectors of the inbound SA in `slot`: what it decrypts must come from `src_prefix`
    and go to `dst_prefix`, else it is dropped and counted as SELECTOR_MISMATCH."""
    table, match = sa_selectors(version(src_prefix)), selectors_match(slot, src_prefix, dst_prefix)
    if insert:
        switch.table_insert(table, match, SELECTOR_OK, {}, priority=SELECTOR_PRIORITY)
    else:
        switch.table_delete(table, match, priority=SELECTOR_PRIORITY)
