"""The P4Runtime client's writes: each table and extern update is built with the p4runtime package's messages
and collected as a serialized one-update WriteRequest; a batch is sent as one WriteRequest (their concatenation
after the device and election id). Every kind of update must parse back into exactly the message the P4Info
says, and a batch into one request with every update in order."""
import json

import grpc
import pytest
from google.protobuf import any_pb2, text_format
from google.rpc import status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from conftest import ROOT
from p4sec.infra import runtime


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


def canon(b):
    return b.lstrip(b"\x00") or b"\x00"


def expected_update(info, kind, table, match, action, params, priority):
    """The Update as the P4Runtime spec has it, written out here from the P4Info (not through the client)."""
    t = next(x for x in info.tables if x.preamble.name == table)
    fid = {f.name: f.id for f in t.match_fields}
    u = p4runtime_pb2.Update(type={"insert": p4runtime_pb2.Update.INSERT, "modify": p4runtime_pb2.Update.MODIFY,
                                   "delete": p4runtime_pb2.Update.DELETE}[kind])
    e = u.entity.table_entry
    e.table_id, e.priority = t.preamble.id, priority
    for name, spec in match.items():
        m = p4runtime_pb2.FieldMatch(field_id=fid[name])
        if spec[0] == "exact":
            m.exact.value = canon(spec[1])
        elif spec[0] == "lpm":
            m.lpm.value, m.lpm.prefix_len = spec[1], spec[2]
        elif spec[0] == "ternary":
            mask = spec[2].rjust(len(spec[1]), b"\0")
            m.ternary.value, m.ternary.mask = canon(bytes(x & y for x, y in zip(spec[1], mask))), canon(spec[2])
        else:
            m.range.low, m.range.high = canon(spec[1]), canon(spec[2])
        e.match.append(m)
    if action is not None:
        a = next(x for x in info.actions if x.preamble.name == action)
        e.action.action.action_id = a.preamble.id
        for p in a.params:
            v = params[p.name]
            v = v if isinstance(v, bytes) else v.to_bytes((p.bitwidth + 7) // 8, "big")
            e.action.action.params.append(p4runtime_pb2.Action.Param(param_id=p.id, value=canon(v)))
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
    req = p4runtime_pb2.WriteRequest.FromString(ups[0])
    assert len(req.updates) == 1
    assert req.updates[0] == expected_update(sw.p4info, kind, table, match, action, params, priority)


@pytest.mark.parametrize("delete", [False, True])
def test_extern_updates_match_the_library(sw, delete):
    obj = {"index": 3, "sa": {"spi": 4096, "enc_key": list(range(20))}} if not delete else {"index": 3}
    with sw.collect() as ups:
        sw.extern_write("GwIngress.sad", "add_sa", obj, delete=delete)
    req = p4runtime_pb2.WriteRequest.FromString(ups[0])
    assert len(req.updates) == 1
    got = req.updates[0]
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


class Sent:
    """Stands in for the Write call: keeps the serialized requests."""

    def __init__(self):
        self.requests = []

    def future(self, request):
        self.requests.append(request)
        return None

    def __call__(self, request):
        self.requests.append(request)
        if getattr(self, "refuse", None):
            raise self.refuse


def test_a_batch_is_one_write_request_with_every_update_in_order(sw):
    sw.device_id, sw.election_id, sw._write_head, sw._write_raw = 3, 7, None, Sent()
    sad_dec = {"hdr.ipv4.src_addr": ("exact", runtime.ip("192.0.2.1")), "hdr.ipv4.dst_addr": ("exact", runtime.ip("198.51.100.1")),
               "meta.esp.spi": ("exact", (0x1234abcd).to_bytes(4, "big"))}
    with sw.collect() as ups:
        sw.extern_write("GwIngress.sad", "add_sa", {"index": 5, "sa": {"spi": 0x1234abcd}})
        sw.table_insert("GwIngress.sad_dec", sad_dec, "GwIngress.dec_sa", {"sa_index": 5})
        sw.table_delete("GwIngress.spd", {"hdr.ipv4.src_addr": ("ternary", runtime.ip("10.1.0.0"), runtime.prefix_mask(16))}, priority=10)
    update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)     # an Update message is accepted as well
    update.entity.register_entry.register_id = 1
    sw.write_async(ups + [update])
    [raw] = sw._write_raw.requests
    req = p4runtime_pb2.WriteRequest.FromString(raw)
    assert req.device_id == 3 and req.election_id.low == 7 and req.election_id.high == 0
    assert [(u.type, u.entity.WhichOneof("entity")) for u in req.updates] == [
        (p4runtime_pb2.Update.INSERT, "extern_entry"), (p4runtime_pb2.Update.INSERT, "table_entry"),
        (p4runtime_pb2.Update.DELETE, "table_entry"), (p4runtime_pb2.Update.MODIFY, "register_entry")]
    assert json.loads(req.updates[0].entity.extern_entry.entry.value) == {"index": 5, "sa": {"spi": 0x1234abcd}}
    assert req.updates[1] == expected_update(sw.p4info, "insert", "GwIngress.sad_dec", sad_dec, "GwIngress.dec_sa", {"sa_index": 5}, 0)
    assert req.updates[3] == update


class Refused(grpc.RpcError):
    """A refused Write as gRPC raises it: the status details name each update's error."""

    def __init__(self, errors):
        st = status_pb2.Status(code=2, message="write failed")
        for code, msg in errors:
            st.details.add().Pack(p4runtime_pb2.Error(canonical_code=code, message=msg))
        self._md = (("grpc-status-details-bin", st.SerializeToString()),)

    def trailing_metadata(self):
        return self._md

    def code(self):
        return grpc.StatusCode.UNKNOWN


def test_a_deferred_write_is_sent_once_when_its_result_is_asked_for(sw):
    sw.device_id, sw.election_id, sw._write_head, sw._write_raw = 1, 1, None, Sent()
    with sw.collect() as ups:
        sw.extern_write("GwIngress.sad", "add_sa", {"index": 5})
    pending = sw.write_async(ups, deferred=True)
    assert pending.deferred and sw._write_raw.requests == []
    pending.result()
    pending.result()
    assert len(sw._write_raw.requests) == 1
    assert json.loads(p4runtime_pb2.WriteRequest.FromString(sw._write_raw.requests[0]).updates[0].entity.extern_entry.entry.value) == {"index": 5}
    # refused: the switch's messages, every time the result is asked for, and it is not sent again
    sw._write_raw = Sent()
    sw._write_raw.refuse = Refused([(0, ""), (6, "no SA in slot 9")])
    pending = sw.write_async(ups + ups, deferred=True)
    for _ in range(2):
        with pytest.raises(runtime.WriteError, match="no SA in slot 9") as e:
            pending.result()
        assert e.value.applied == [True, False]
    assert len(sw._write_raw.requests) == 1
