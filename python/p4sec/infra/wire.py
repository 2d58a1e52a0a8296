"""Protobuf wire format for the controller's hot paths, driven by the official descriptors.

The `protobuf` the ecosystem's tools pin (3.20: `p4runtime-shell` 0.0.6 requires it and `p4runtime` 1.4.1, whose
generated modules newer runtimes refuse) has no compiled implementation for this Python: building a message
and serializing it walks every field through reflection, about 0.1 ms for one P4Runtime table update, which is
most of a tunnel setup. Here a message is given as a dict keyed by field name (nested messages as dicts,
repeated fields as lists) and encoded by a plan compiled once per message type from its descriptor (the
`p4runtime` package's `DESCRIPTOR`s: field numbers, types, oneofs and packing come from there, never from
this file). The bytes are the ones the library writes for the same message: fields in number order, proto3
fields without presence left out when they hold their default, packed repeated scalars
(tests/ipsec/test_wire.py compares them over every P4Runtime message kind).

`fields` reads an encoding back one level at a time (the reconciliation's reader of large Read answers);
`numbers` gives a message type's field numbers by name for it.
"""
import struct

from google.protobuf.descriptor import FieldDescriptor as FD

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5

_RANGES = {FD.TYPE_INT32: (-(1 << 31), 1 << 31), FD.TYPE_INT64: (-(1 << 63), 1 << 63),
           FD.TYPE_UINT32: (0, 1 << 32), FD.TYPE_UINT64: (0, 1 << 64),
           FD.TYPE_SINT32: (-(1 << 31), 1 << 31), FD.TYPE_SINT64: (-(1 << 63), 1 << 63),
           FD.TYPE_FIXED32: (0, 1 << 32), FD.TYPE_FIXED64: (0, 1 << 64),
           FD.TYPE_SFIXED32: (-(1 << 31), 1 << 31), FD.TYPE_SFIXED64: (-(1 << 63), 1 << 63),
           FD.TYPE_ENUM: (-(1 << 31), 1 << 31)}


_SMALL = [bytes((i,)) for i in range(0x80)]


def varint(n):
    """The varint encoding of a non-negative integer."""
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7f) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _check_int(f, v):
    if type(v) is not int:
        if isinstance(v, bool) and f.type == FD.TYPE_BOOL:
            return v
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"{f.full_name}: an integer is needed, not {type(v).__name__}")
    lo, hi = _RANGES.get(f.type, (0, 2))
    if not lo <= v < hi:
        raise ValueError(f"{f.full_name}: {v} is out of range for its type")
    return v


def _scalar(f):
    """(wire type, value -> payload bytes) of a scalar field; the payload of a bytes or string field starts
    with its length."""
    t = f.type
    if t in (FD.TYPE_BYTES, FD.TYPE_STRING):
        def enc(v, f=f, s=(t == FD.TYPE_STRING)):
            if s:
                if not isinstance(v, str):
                    raise TypeError(f"{f.full_name}: a str is needed, not {type(v).__name__}")
                v = v.encode()
            elif not isinstance(v, (bytes, bytearray, memoryview)):
                raise TypeError(f"{f.full_name}: bytes are needed, not {type(v).__name__}")
            return varint(len(v)) + bytes(v)
        return _LEN, enc
    if t == FD.TYPE_BOOL:
        return _VARINT, lambda v, f=f: b"\x01" if _check_int(f, v) else b"\x00"
    if t in (FD.TYPE_SINT32, FD.TYPE_SINT64):
        return _VARINT, lambda v, f=f: varint(2 * v if _check_int(f, v) >= 0 else -2 * v - 1)
    if t in (FD.TYPE_INT32, FD.TYPE_INT64, FD.TYPE_UINT32, FD.TYPE_UINT64, FD.TYPE_ENUM):
        return _VARINT, lambda v, f=f: varint(_check_int(f, v) & 0xffffffffffffffff)
    if t in (FD.TYPE_FIXED32, FD.TYPE_SFIXED32):
        fmt = "<I" if t == FD.TYPE_FIXED32 else "<i"
        return _I32, lambda v, f=f, fmt=fmt: struct.pack(fmt, _check_int(f, v))
    if t in (FD.TYPE_FIXED64, FD.TYPE_SFIXED64):
        fmt = "<Q" if t == FD.TYPE_FIXED64 else "<q"
        return _I64, lambda v, f=f, fmt=fmt: struct.pack(fmt, _check_int(f, v))
    if t in (FD.TYPE_FLOAT, FD.TYPE_DOUBLE):
        fmt, wt = ("<f", _I32) if t == FD.TYPE_FLOAT else ("<d", _I64)
        return wt, lambda v, fmt=fmt: struct.pack(fmt, float(v))
    raise TypeError(f"{f.full_name}: field type {t} (groups) is not supported")


def _packed(f):
    """Whether a repeated field is written packed, as the protobuf runtime decides it."""
    if f.type in (FD.TYPE_STRING, FD.TYPE_BYTES, FD.TYPE_MESSAGE, FD.TYPE_GROUP):
        return False
    opts = f.GetOptions() if f.has_options else None
    if f.containing_type.syntax == "proto2":
        return bool(opts and opts.packed)
    return not (opts and opts.HasField("packed") and not opts.packed)


class _Plan:
    """How to encode one message type: per field name, (number, encoder of (tag + payload) from a value)."""

    __slots__ = ("name", "fields", "oneofs")

    def __init__(self, desc):
        self.name = desc.full_name
        self.fields = {}
        self.oneofs = {f.name: f.containing_oneof.name for f in desc.fields if f.containing_oneof is not None}

    def encode(self, value):
        if not isinstance(value, dict):
            raise TypeError(f"{self.name}: a dict of fields is needed, not {type(value).__name__}")
        parts, last, ordered = [], -1, True
        fields = self.fields
        for k, v in value.items():
            try:
                num, enc = fields[k]
            except KeyError:
                raise KeyError(f"{self.name} has no field {k!r}") from None
            b = enc(v)
            if b:
                parts.append((num, b))
                ordered = ordered and num > last
                last = num
        if len(parts) > 1:
            if self.oneofs and len(self.oneofs.keys() & value.keys()) > 1:
                seen = {}
                for k in value:
                    o = self.oneofs.get(k)
                    if o is not None and seen.setdefault(o, k) != k:
                        raise ValueError(f"{self.name}: {seen[o]!r} and {k!r} are both members of oneof {o!r}")
            if not ordered:
                parts.sort(key=lambda p: p[0])
            return b"".join([p[1] for p in parts])
        return parts[0][1] if parts else b""


_PLANS = {}


def _plan(desc):
    p = _PLANS.get(desc.full_name)
    if p is not None:
        return p
    p = _PLANS[desc.full_name] = _Plan(desc)     # registered first: message types may nest themselves
    try:
        for f in desc.fields:
            p.fields[f.name] = (f.number, _field(f))
    except Exception:
        del _PLANS[desc.full_name]      # no half-made plan stays behind
        raise
    return p


def _field(f):
    """The encoder of field f: value -> tag and payload (b"" when nothing is written)."""
    repeated = f.label == FD.LABEL_REPEATED
    if f.type == FD.TYPE_MESSAGE:
        tag = varint(f.number << 3 | _LEN)
        sub = f.message_type
        plan = _plan(sub)
        if repeated and sub.GetOptions().map_entry:
            def enc_map(v, f=f, tag=tag, plan=plan):
                if not isinstance(v, dict):
                    raise TypeError(f"{f.full_name}: a map is given as a dict, not {type(v).__name__}")
                out = []
                for key, val in v.items():
                    b = plan.encode({"key": key, "value": val})
                    out.append(tag + varint(len(b)) + b)
                return b"".join(out)
            return enc_map

        def enc_msg(v, tag=tag, plan=plan):
            b = plan.encode(v)
            n = len(b)
            return tag + (_SMALL[n] if n < 0x80 else varint(n)) + b
        if not repeated:
            return enc_msg
        return _repeated(f, enc_msg)
    wt, enc = _scalar(f)
    tag = varint(f.number << 3 | wt)
    if repeated:
        if _packed(f):
            ptag = varint(f.number << 3 | _LEN)

            def enc_packed(v, f=f, ptag=ptag, enc=enc):
                if not isinstance(v, (list, tuple)):
                    raise TypeError(f"{f.full_name}: a repeated field is given as a list, not {type(v).__name__}")
                if not v:
                    return b""
                b = b"".join(enc(x) for x in v)
                return ptag + varint(len(b)) + b
            return enc_packed
        return _repeated(f, lambda v, tag=tag, enc=enc: tag + enc(v))
    if f.containing_oneof is None and f.containing_type.syntax == "proto3":
        # the common cases first: the checks inline, the general encoder for everything else (and its errors)
        if f.type in (FD.TYPE_UINT32, FD.TYPE_UINT64):
            hi = _RANGES[f.type][1]

            def enc_unsigned(v, tag=tag, enc=enc, hi=hi):
                if type(v) is int and 0 <= v < hi:
                    if v < 0x80:
                        return tag + _SMALL[v] if v else b""
                    return tag + varint(v)
                b = enc(v)                  # other int types (an IntEnum), or the error
                return tag + b if v else b""
            return enc_unsigned
        if f.type == FD.TYPE_BYTES:
            def enc_bytes(v, tag=tag, enc=enc):
                if type(v) is bytes and len(v) < 0x80:
                    return tag + _SMALL[len(v)] + v if v else b""
                b = enc(v)
                return tag + b if v else b""
            return enc_bytes

        def enc_implicit(v, tag=tag, enc=enc):
            b = enc(v)                  # checks the value's type and range
            return tag + b if v else b""    # no presence: a default (zero, empty) value is not written
        return enc_implicit
    return lambda v, tag=tag, enc=enc: tag + enc(v)


def _repeated(f, one):
    def enc(v, f=f, one=one):
        if not isinstance(v, (list, tuple)):
            raise TypeError(f"{f.full_name}: a repeated field is given as a list, not {type(v).__name__}")
        return b"".join(one(x) for x in v)
    return enc


def encode(message_type, value):
    """The encoding of the message of `message_type` (a generated class or its descriptor) whose fields are
    `value`: a dict by field name; a nested message is a dict, a repeated field a list, a map a dict, an enum
    an int. Unknown names, wrong types, out-of-range integers and two members of one oneof raise errors that
    name the field."""
    return _plan(getattr(message_type, "DESCRIPTOR", message_type)).encode(value)


def numbers(message_type):
    """{field name: field number} of a message type (a generated class or its descriptor)."""
    desc = getattr(message_type, "DESCRIPTOR", message_type)
    return {f.name: f.number for f in desc.fields}


def read_varint(b, i):
    """(value, next offset) of the varint at b[i:]."""
    n = shift = 0
    while True:
        if i >= len(b):
            raise ValueError("protobuf encoding ends inside a varint")
        c = b[i]
        i += 1
        n |= (c & 0x7f) << shift
        if c < 0x80:
            return n, i
        shift += 7
        if shift > 63:
            raise ValueError("protobuf varint longer than 10 bytes")


def fields(b):
    """(field number, value) of each field of an encoded message: an int (varint) or bytes (length-delimited,
    fixed32, fixed64)."""
    i, end = 0, len(b)
    while i < end:
        key, i = read_varint(b, i)
        wt = key & 7
        if wt == _VARINT:
            v, i = read_varint(b, i)
        elif wt == _LEN:
            n, i = read_varint(b, i)
            if i + n > end:
                raise ValueError("protobuf field runs past the end of its message")
            v, i = b[i:i + n], i + n
        elif wt in (_I64, _I32):
            n = 8 if wt == _I64 else 4
            if i + n > end:
                raise ValueError("protobuf field runs past the end of its message")
            v, i = b[i:i + n], i + n
        else:
            raise ValueError(f"unsupported protobuf wire type {wt}")
        yield key >> 3, v
