"""p4sec.wire against the protobuf library: random values for every message type of P4Runtime and P4Info (every
field type, oneofs, nested and repeated messages, maps, packed scalars, defaults) encode to exactly the bytes
the library writes for the same message; bad values get errors naming the field."""
import random

import pytest
from google.protobuf.descriptor import FieldDescriptor as FD
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from p4sec.infra import wire

INT_RANGES = {FD.TYPE_INT32: (-(1 << 31), (1 << 31) - 1), FD.TYPE_INT64: (-(1 << 63), (1 << 63) - 1),
              FD.TYPE_UINT32: (0, (1 << 32) - 1), FD.TYPE_UINT64: (0, (1 << 64) - 1),
              FD.TYPE_SINT32: (-(1 << 31), (1 << 31) - 1), FD.TYPE_SINT64: (-(1 << 63), (1 << 63) - 1),
              FD.TYPE_FIXED32: (0, (1 << 32) - 1), FD.TYPE_FIXED64: (0, (1 << 64) - 1),
              FD.TYPE_SFIXED32: (-(1 << 31), (1 << 31) - 1), FD.TYPE_SFIXED64: (-(1 << 63), (1 << 63) - 1)}


def scalar(rng, f):
    t = f.type
    if t == FD.TYPE_BYTES:
        return rng.choice([b"", b"\x00", bytes(rng.randrange(256) for _ in range(rng.choice([1, 4, 16, 200])))])
    if t == FD.TYPE_STRING:
        return rng.choice(["", "a", "GwIngress.spd", "p4sec/esp_sad.add_sa", "é✓" * rng.randrange(1, 5)])
    if t == FD.TYPE_BOOL:
        return rng.choice([False, True])
    if t == FD.TYPE_ENUM:
        return rng.choice([v.number for v in f.enum_type.values])
    if t in (FD.TYPE_FLOAT, FD.TYPE_DOUBLE):
        return rng.choice([0.0, 1.5, -2.25])
    lo, hi = INT_RANGES[t]
    return rng.choice([0, 1, lo, hi, rng.randint(lo, hi), 127, 128, 300])


def random_value(rng, desc, depth=0):
    """A random dict for a message of `desc`: a random subset of its fields, at most one member per oneof."""
    out, oneofs = {}, set()
    for f in desc.fields:
        if rng.random() < (0.3 if depth > 2 else 0.6):
            continue
        if f.containing_oneof is not None:
            if f.containing_oneof.name in oneofs:
                continue
            oneofs.add(f.containing_oneof.name)
        if f.type == FD.TYPE_MESSAGE:
            if depth > 4:
                continue
            sub = f.message_type
            if f.label == FD.LABEL_REPEATED and sub.GetOptions().map_entry:
                kf, vf = sub.fields_by_name["key"], sub.fields_by_name["value"]
                out[f.name] = {scalar(rng, kf) if kf.type != FD.TYPE_STRING else f"k{i}":
                               random_value(rng, vf.message_type, depth + 1) if vf.type == FD.TYPE_MESSAGE else scalar(rng, vf)
                               for i in range(rng.randrange(3))}
            elif f.label == FD.LABEL_REPEATED:
                out[f.name] = [random_value(rng, sub, depth + 1) for _ in range(rng.randrange(3))]
            else:
                out[f.name] = random_value(rng, sub, depth + 1)
        elif f.label == FD.LABEL_REPEATED:
            out[f.name] = [scalar(rng, f) for _ in range(rng.randrange(4))]
        else:
            out[f.name] = scalar(rng, f)
    return out


def fill(msg, value):
    """The same message through the library's API."""
    msg.SetInParent() if hasattr(msg, "SetInParent") else None
    for name, v in value.items():
        f = msg.DESCRIPTOR.fields_by_name[name]
        if f.type == FD.TYPE_MESSAGE:
            if f.label == FD.LABEL_REPEATED and f.message_type.GetOptions().map_entry:
                m = getattr(msg, name)
                for k, x in v.items():
                    if isinstance(x, dict):
                        fill(m[k], x)
                    else:
                        m[k] = x
            elif f.label == FD.LABEL_REPEATED:
                for x in v:
                    fill(getattr(msg, name).add(), x)
            else:
                sub = getattr(msg, name)
                sub.SetInParent()
                fill(sub, v)
        elif f.label == FD.LABEL_REPEATED:
            getattr(msg, name).extend(v)
        else:
            setattr(msg, name, v)
    return msg


def message_types():
    seen, out = set(), []

    def walk(d):
        if d.full_name in seen or d.GetOptions().map_entry:
            return
        seen.add(d.full_name)
        out.append(d)
        for f in d.fields:
            if f.message_type is not None:
                walk(f.message_type)
    for mod in (p4runtime_pb2, p4info_pb2):
        for d in mod.DESCRIPTOR.message_types_by_name.values():
            walk(d)
    return out


TYPES = message_types()


def test_every_message_type_is_covered():
    names = {d.full_name for d in TYPES}
    assert {"p4.v1.WriteRequest", "p4.v1.TableEntry", "p4.v1.ExternEntry", "p4.config.v1.P4Info",
            "p4.config.v1.P4TypeInfo", "p4.v1.PacketReplicationEngineEntry"} <= names
    kinds = {f.type for d in TYPES for f in d.fields}
    assert {FD.TYPE_MESSAGE, FD.TYPE_BYTES, FD.TYPE_STRING, FD.TYPE_UINT32, FD.TYPE_UINT64, FD.TYPE_INT32,
            FD.TYPE_INT64, FD.TYPE_BOOL, FD.TYPE_ENUM} <= kinds


@pytest.mark.parametrize("desc", TYPES, ids=[d.full_name for d in TYPES])
def test_random_messages_encode_as_the_library_does(desc):
    from google.protobuf import symbol_database
    cls = symbol_database.Default().GetSymbol(desc.full_name)
    rng = random.Random(desc.full_name)
    for _ in range(25):
        value = random_value(rng, desc)
        want = fill(cls(), value).SerializeToString()
        got = wire.encode(cls, value)
        assert got == want, value
        assert cls.FromString(got).SerializeToString() == want      # (an Any is compared by its encoding)


def test_defaults_without_presence_are_left_out_and_oneof_members_are_not():
    assert wire.encode(p4runtime_pb2.TableEntry, {"table_id": 0, "priority": 0, "is_default_action": False}) == b""
    # a oneof member holding its default is still the member that is set
    got = wire.encode(p4runtime_pb2.FieldMatch, {"field_id": 1, "lpm": {"value": b"", "prefix_len": 0}})
    want = p4runtime_pb2.FieldMatch(field_id=1)
    want.lpm.SetInParent()
    assert got == want.SerializeToString() and p4runtime_pb2.FieldMatch.FromString(got).WhichOneof("field_match_type") == "lpm"
    assert wire.encode(p4runtime_pb2.Update, {"entity": {}}) == p4runtime_pb2.Update(entity=p4runtime_pb2.Entity()).SerializeToString()


def test_int_subclasses_encode_as_their_value():
    import enum

    class Id(enum.IntEnum):
        ZERO, SMALL, LARGE = 0, 5, 1 << 20
    for v in Id:
        want = p4runtime_pb2.TableEntry(table_id=int(v), priority=int(v)).SerializeToString()
        assert wire.encode(p4runtime_pb2.TableEntry, {"table_id": v, "priority": v}) == want, v


def test_bad_values_get_errors_that_name_the_field():
    with pytest.raises(KeyError, match="p4.v1.TableEntry has no field 'table'"):
        wire.encode(p4runtime_pb2.TableEntry, {"table": 1})
    with pytest.raises(ValueError, match="p4.v1.TableEntry.table_id: 4294967296 is out of range"):
        wire.encode(p4runtime_pb2.TableEntry, {"table_id": 1 << 32})
    with pytest.raises(ValueError, match="p4.v1.TableEntry.controller_metadata: -1 is out of range"):
        wire.encode(p4runtime_pb2.TableEntry, {"controller_metadata": -1})
    with pytest.raises(TypeError, match="p4.v1.FieldMatch.Exact.value: bytes are needed, not str"):
        wire.encode(p4runtime_pb2.FieldMatch, {"exact": {"value": "10.0.0.1"}})
    with pytest.raises(TypeError, match="p4.v1.TableEntry.table_id: an integer is needed, not str"):
        wire.encode(p4runtime_pb2.TableEntry, {"table_id": "7"})
    with pytest.raises(ValueError, match="'exact' and 'lpm' are both members of oneof 'field_match_type'"):
        wire.encode(p4runtime_pb2.FieldMatch, {"exact": {"value": b"\x01"}, "lpm": {"value": b"\x01", "prefix_len": 8}})
    with pytest.raises(TypeError, match="p4.v1.TableEntry.match: a repeated field is given as a list"):
        wire.encode(p4runtime_pb2.TableEntry, {"match": {"field_id": 1}})
    with pytest.raises(TypeError, match="p4.v1.Entity: a dict of fields is needed, not int"):
        wire.encode(p4runtime_pb2.Update, {"entity": 3})


def test_fields_reads_an_encoding_back_and_refuses_truncation():
    e = p4runtime_pb2.TableEntry(table_id=300, priority=7)
    e.match.add(field_id=2).exact.value = b"\x0a\x00\x00\x01"
    b = e.SerializeToString()
    got = list(wire.fields(b))
    n = wire.numbers(p4runtime_pb2.TableEntry)
    assert got[0] == (n["table_id"], 300) and got[-1] == (n["priority"], 7)
    fm = dict(wire.fields(got[1][1]))
    assert fm[wire.numbers(p4runtime_pb2.FieldMatch)["field_id"]] == 2
    for cut in range(1, len(b)):
        try:
            list(wire.fields(b[:cut]))
        except ValueError:
            continue
        # a cut on a field boundary is a shorter, valid message
        assert p4runtime_pb2.TableEntry.FromString(b[:cut]) is not None
    with pytest.raises(ValueError, match="longer than 10 bytes"):
        list(wire.fields(b"\x08" + b"\xff" * 11 + b"\x01"))
