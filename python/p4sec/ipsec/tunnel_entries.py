"""The entries a tunnel puts on its gateways, written (or removed) through each gateway's switch: an inbound SA's
SAD-dec entry with its selectors, the SPD policies of site-to-site and host-to-site tunnels, a route in the clear;
and the site prefixes a site-to-site tunnel protects (checked against its gateways' sites; p4sec.ipsec.store keeps
two tunnels from protecting the same pair).

Stateless: the gateways are p4sec.ipsec.ctlbase.Gateway objects, the writes p4sec.ipsec.gateway's; used by
p4sec.ipsec.controller and p4sec.ipsec.hosts (p4sec.ipsec.reconcile derives the same entries from the store)."""
import ipaddress

from p4sec.ipsec import gateway as gwp
from p4sec.ipsec.ctlbase import ControllerError, _lpm

SPD_PRIORITY, HOST_SPD_PRIORITY = 10, 20


def sad_dec(src, dst, spi, slot, selectors, insert=True):
    """The SAD-dec entry on gateway dst of an inbound SA from src (a gateway, or a host by its address) and its
    selectors ((inner source, inner destination) prefixes, ctlbase.sa_selectors: what the SA decrypts must match
    them): the selectors before the entry, removed after it (also when the entry was gone already; selectors
    found missing are fine)."""
    if insert:
        if selectors:
            gwp.selectors_write(dst.switch, slot, *selectors)
        gwp.sad_dec_write(dst.switch, src.address, dst.address, spi, slot)
        return
    try:
        gwp.sad_dec_write(dst.switch, src.address, dst.address, spi, slot, insert=False)
    finally:
        if selectors:
            try:
                gwp.selectors_write(dst.switch, slot, *selectors, insert=False)
            except Exception as e:
                if "no entry with this match" not in str(e):
                    raise


def clear_route(gw, prefix, insert=True):
    """The route for a remote site's prefix in the clear (BYPASS tunnels): out of gw's WAN port."""
    _lpm(gw.switch, prefix, gw.wan_mac, gw.wan_port, insert)


def spd(src, dst, out_slot, insert=True, action=gwp.PROTECT, on=None, sites=None):
    """The policy for traffic from src's site to dst's, on gateway `on` (default: src); `sites` maps a gateway's
    name to the prefix a tunnel protects behind it (default: its whole site)."""
    on = on or src
    sp, dp = (sites or {}).get(src.name, src.lan_prefix), (sites or {}).get(dst.name, dst.lan_prefix)
    v = gwp.version(sp)
    if v != gwp.version(dp):
        raise ControllerError(f"sites {sp} and {dp} are of different IP versions")
    match, table = gwp.spd_match(sp, dp), gwp.spd(v)
    if insert:
        params = {gwp.SA_INDEX: out_slot} if action == gwp.PROTECT else {}
        on.switch.table_insert(table, match, action, params, priority=SPD_PRIORITY)
    else:
        on.switch.table_delete(table, match, priority=SPD_PRIORITY)


def host_spd(gw, inner, out_slot, insert=True):
    """The policy on gw for its site's traffic to a host's inner address `inner`: protected with the SA of
    `out_slot`."""
    match, table = gwp.spd_match(gw.lan_prefix, inner), gwp.spd(gwp.version(inner))
    if insert:
        gw.switch.table_insert(table, match, gwp.PROTECT, {gwp.SA_INDEX: out_slot}, priority=HOST_SPD_PRIORITY)
    else:
        gw.switch.table_delete(table, match, priority=HOST_SPD_PRIORITY)


def site_prefixes(a, b, a_prefix, b_prefix):
    """The prefixes a tunnel between gateways a and b protects ({gateway name: prefix}): a subnet of each gateway's
    site (default: the whole site). Precise errors for a malformed prefix, one outside its gateway's site, or
    mixed versions."""
    sites = {}
    for gw, p in ((a, a_prefix), (b, b_prefix)):
        if p is None:
            sites[gw.name] = gw.lan_prefix
            continue
        try:
            net = ipaddress.ip_network(p)
        except (TypeError, ValueError) as e:
            raise ControllerError(f"prefix for {gw.name}: {e}") from None
        site = ipaddress.ip_network(gw.lan_prefix, strict=False)
        if net.version != site.version or not net.subnet_of(site):
            raise ControllerError(f"prefix {p} is not inside {gw.name}'s site {gw.lan_prefix}")
        sites[gw.name] = str(net)
    if ipaddress.ip_network(sites[a.name]).version != ipaddress.ip_network(sites[b.name]).version:
        raise ControllerError(f"prefixes {sites[a.name]} and {sites[b.name]} are of different IP versions")
    return sites
