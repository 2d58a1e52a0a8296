"""The entries a tunnel puts on its gateways (p4sec.ipsec.tunnel_entries), on a switch that records its writes:
the order of an inbound SA's SAD-dec entry and its selectors both ways, a removal that finds its selectors gone,
the policies' tables and priorities, and the checks of the prefixes a site-to-site tunnel protects."""
import pytest

from p4sec.ipsec import gateway as gwp
from p4sec.ipsec import store
from p4sec.ipsec import tunnel_entries as te
from p4sec.ipsec.ctlbase import ControllerError, Gateway


class RecordingSwitch:
    """Records table writes as (op, table, action or None, params or None, priority); `missing`: tables whose
    deletes fail as a switch reports an entry that is not there."""

    def __init__(self, missing=()):
        self.ops, self.missing = [], set(missing)

    def table_insert(self, table, match, action, params, priority=0):
        self.ops.append(("insert", table, action, params, priority))

    def table_delete(self, table, match, priority=0):
        if table in self.missing:
            raise RuntimeError(f"{table}: no entry with this match")
        self.ops.append(("delete", table, None, None, priority))


def gateway(name, lan, address, switch=None):
    return Gateway(name, switch or RecordingSwitch(), address, lan, 1, "02:00:00:00:00:0a", 2, "02:00:00:00:00:0b", "0.0.0.0/0")


def tables(sw):
    return [(op, table) for op, table, *_ in sw.ops]


def test_selectors_go_in_before_the_sad_dec_entry_and_out_after_it():
    a, b = gateway("A", "10.1.0.0/16", "192.0.2.1"), gateway("B", "10.2.0.0/16", "198.51.100.1")
    sel = ("10.1.0.0/16", "10.2.0.0/16")
    te.sad_dec(a, b, 0x1234, 7, sel)
    te.sad_dec(a, b, 0x1234, 7, sel, insert=False)
    assert tables(b.switch) == [("insert", gwp.sa_selectors(4)), ("insert", gwp.sad_dec(4)),
                                ("delete", gwp.sad_dec(4)), ("delete", gwp.sa_selectors(4))]
    assert b.switch.ops[1][2:4] == (gwp.DEC_SA, {gwp.SA_INDEX: 7}) and a.switch.ops == []


def test_a_removal_that_finds_its_selectors_gone_is_fine_but_a_missing_entry_is_not():
    a = gateway("A", "10.1.0.0/16", "192.0.2.1")
    b = gateway("B", "10.2.0.0/16", "198.51.100.1", RecordingSwitch(missing={gwp.sa_selectors(4)}))
    te.sad_dec(a, b, 1, 3, ("10.1.0.0/16", "10.2.0.0/16"), insert=False)
    assert tables(b.switch) == [("delete", gwp.sad_dec(4))]
    c = gateway("C", "10.3.0.0/16", "203.0.113.1", RecordingSwitch(missing={gwp.sad_dec(4)}))
    with pytest.raises(RuntimeError, match="no entry"):
        te.sad_dec(a, c, 1, 3, ("10.1.0.0/16", "10.3.0.0/16"), insert=False)
    assert tables(c.switch) == [("delete", gwp.sa_selectors(4))]      # its selectors still go


def test_policies_protect_with_the_slot_or_bypass_on_the_gateway_named():
    a, b = gateway("A", "10.1.0.0/16", "192.0.2.1"), gateway("B", "10.2.0.0/16", "198.51.100.1")
    te.spd(a, b, 5, sites={"A": "10.1.3.0/24"})
    te.spd(a, b, None, action=gwp.BYPASS, on=b)
    assert a.switch.ops == [("insert", gwp.spd(4), gwp.PROTECT, {gwp.SA_INDEX: 5}, te.SPD_PRIORITY)]
    assert b.switch.ops == [("insert", gwp.spd(4), gwp.BYPASS, {}, te.SPD_PRIORITY)]
    te.host_spd(a, "2001:db8:9::7/128", 6)
    assert a.switch.ops[-1] == ("insert", gwp.spd(6), gwp.PROTECT, {gwp.SA_INDEX: 6}, te.HOST_SPD_PRIORITY)
    v6 = gateway("C", "2001:db8:3::/48", "2001:db8::3")
    with pytest.raises(ControllerError, match="different IP versions"):
        te.spd(a, v6, 1)


def test_site_prefixes_default_to_the_sites_and_are_checked():
    a, b = gateway("A", "10.1.0.0/16", "192.0.2.1"), gateway("B", "10.2.0.0/16", "198.51.100.1")
    assert te.site_prefixes(a, b, None, None) == {"A": "10.1.0.0/16", "B": "10.2.0.0/16"}
    assert te.site_prefixes(a, b, "10.1.3.0/24", None) == {"A": "10.1.3.0/24", "B": "10.2.0.0/16"}
    with pytest.raises(ControllerError, match=r"prefix 10\.3\.0\.0/24 is not inside A's site 10\.1\.0\.0/16"):
        te.site_prefixes(a, b, "10.3.0.0/24", None)
    with pytest.raises(ControllerError, match="prefix for B: .*10.2.0.1/16"):
        te.site_prefixes(a, b, None, "10.2.0.1/16")
    with pytest.raises(ControllerError, match="prefix for A"):
        te.site_prefixes(a, b, "not a prefix", None)
    # the store keeps one tunnel per pair of prefixes, whichever its direction (the key of earlier stores)
    assert store.pair_key({"B": "10.2.0.0/16", "A": "10.1.3.0/24"}) == store.pair_key({"A": "10.1.3.0/24", "B": "10.2.0.0/16"}) \
        == "pair:A=10.1.3.0/24|B=10.2.0.0/16"
