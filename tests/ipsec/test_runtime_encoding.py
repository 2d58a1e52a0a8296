"""The P4Runtime client encodes table and extern updates itself (the installed protobuf is pure Python and slow):
every kind of update must parse back, with the library, into exactly the message the library would have built."""
import json

import pytest
from google.protobuf import any_pb2, text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from conftest import ROOT
from p4sec import runtime


class Offline(runtime.Switch):
    """A Switch without a connection: writes are collected, never sent."""

    def __init__(self, p4info):
        self.p4info, self._names, self._names_of, self._batch = p4info, {}, None, None


@pytest.fixture(scope="module")
def sw(p4sec_bin, tmp_path_factory):
    import subprocess
    out = tmp_path_factory.mktemp("gw")
    subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "ipsec_gateway.p4"), "-o", str(out)], check=True)
    info = p4info_pb2.P4Info()
    text_format.Parse((out / "p4info.txtpb").read_text(), info)
    return Offline(info)


def library_update(sw, kind, table, match, action, params, priority):
    u = p4runtime_pb2.Update(type={"insert": p4runtime_pb2.Update.INSERT, "modify": p4runtime_pb2.Update.MODIFY,
                                   "delete": p4runtime_pb2.Update.DELETE}[kind])
    u.entity.table_entry.CopyFrom(sw._entry(table, match, action, params, priority))
    return u


CASES = [
    ("insert", "GwIngress.sad_dec", {"hdr.ipv4.src_addr": ("exact", runtime.ip("192.0.2.1")), "hdr.ipv4.dst_addr": ("exact", runtime.ip("198.51.100.1")),
                                     "meta.esp.spi": ("exact", (0x1234abcd).to_bytes(4, "big"))}, "GwIngress.dec_sa", {"sa_index": 70000}, 0),
    ("insert", "GwIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": ("lpm", runtime.ip("10.2.0.0"), 16)}, "GwIngress.set_nhop",
     {"dst_mac": runtime.mac("02:00:00:00:0b:01"), "src_mac": runtime.mac("02:00:00:00:00:01"), "port": 2}, 0),
    ("modify", "GwIngress.spd", {"hdr.ipv4.src_addr": ("ternary", runtime.ip("10.1.3.7"), runtime.prefix_mask(24)),
                                 "hdr.ipv4.dst_addr": ("ternary", runtime.ip("10.2.0.0"), runtime.prefix_mask(16)),
                                 "meta.dport": ("range", (1000).to_bytes(2, "big"), (2000).to_bytes(2, "big"))}, "GwIngress.protect", {"sa_index": 0}, 10),
    ("delete", "GwIngress.spd", {"hdr.ipv4.src_addr": ("ternary", runtime.ip("10.1.0.0"), runtime.prefix_mask(16))}, None, {}, 300),
    ("insert", "GwIngress.spd6", {"hdr.ipv6.dst_addr": ("ternary", runtime.addr("2001:db8::"), runtime.prefix_mask(32, 128))}, "GwIngress.bypass", {}, 20),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_table_updates_match_the_library(sw, case):
    kind, table, match, action, params, priority = case
    with sw.collect() as ups:
        getattr(sw, f"table_{kind}")(table, match, *(() if kind == "delete" else (action, params)), priority=priority)
    assert len(ups) == 1 and isinstance(ups[0], bytes)
    got = p4runtime_pb2.Update.FromString(ups[0])
    assert got == library_update(sw, kind, table, match, action, params, priority)


@pytest.mark.parametrize("delete", [False, True])
def test_extern_updates_match_the_library(sw, delete):
    obj = {"index": 3, "sa": {"spi": 4096, "enc_key": list(range(20))}} if not delete else {"index": 3}
    with sw.collect() as ups:
        sw.extern_write("GwIngress.sad", "add_sa", obj, delete=delete)
    got = p4runtime_pb2.Update.FromString(ups[0])
    ext = next(t for t in sw.p4info.externs for i in t.instances if i.preamble.name == "GwIngress.sad")
    want = p4runtime_pb2.Update(type=p4runtime_pb2.Update.DELETE if delete else p4runtime_pb2.Update.INSERT)
    want.entity.extern_entry.extern_type_id, want.entity.extern_entry.extern_id = ext.extern_type_id, ext.instances[0].preamble.id
    want.entity.extern_entry.entry.CopyFrom(any_pb2.Any(type_url=f"p4sec/{ext.extern_type_name}.add_sa", value=json.dumps(obj).encode()))
    # (an Any is compared through its encoding: the library cannot resolve the p4sec type URL)
    assert got.SerializeToString(deterministic=True) == want.SerializeToString(deterministic=True)
    assert got.entity.extern_entry.entry.type_url == "p4sec/esp_sad.add_sa" and json.loads(got.entity.extern_entry.entry.value) == obj


def test_unknown_names_get_precise_errors(sw):
    with pytest.raises(ValueError, match="no table named 'GwIngress.nope'"):
        sw.table_insert("GwIngress.nope", {}, "GwIngress.drop", {})
    with pytest.raises(ValueError, match="has no key field 'hdr.ipv4.ttl'"):
        sw.table_insert("GwIngress.ipv4_lpm", {"hdr.ipv4.ttl": ("exact", b"\x01")}, "GwIngress.drop", {})
    with pytest.raises(ValueError, match="unknown match kind 'fuzzy'"):
        sw.table_insert("GwIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": ("fuzzy", b"\x01")}, "GwIngress.drop", {})
