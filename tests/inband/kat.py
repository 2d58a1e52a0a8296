"""The published ASCON AEAD KATs (carried in crates/externs/tests/data, see its README) as P4EAD service requests
(programs/p4ead_service.p4)."""
import pathlib
import struct

DATA = pathlib.Path(__file__).resolve().parents[2] / "crates" / "externs" / "tests" / "data"
KAT_FILES = {
    "aead128": DATA / "ascon-aead128.txt",
    "v12": DATA / "ascon128-v12.txt",
}
VARIANT = {"aead128": 0, "v12": 1}
ETHERTYPE = 0x88B5
MAC_A = bytes.fromhex("020000000001")
MAC_B = bytes.fromhex("020000000002")


def load_kats(variant):
    """[(count, key, nonce, pt, ad, ct_and_tag)] from a KAT table (one vector a line, the columns named first)."""
    lines = [ln.split() for ln in KAT_FILES[variant].read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    cols, out = lines[0], []
    for cells in lines[1:]:
        r = {c: ("" if v == "-" else v) for c, v in zip(cols, cells, strict=True)}
        out.append((int(r["count"]), bytes.fromhex(r["key"]), bytes.fromhex(r["nonce"]), bytes.fromhex(r["pt"]),
                    bytes.fromhex(r["ad"]), bytes.fromhex(r["ct"])))
    return out


def blocks(b):
    """zero-fill to whole 8-byte blocks"""
    return b + bytes(-len(b) % 8)


def request(op, variant, key_id, nonce, ad, data, tag=bytes(16), status=0, passes=0, rpp=0, src=MAC_A, dst=MAC_B):
    hdr = struct.pack("!BBBBBBHI", op, VARIANT[variant] if isinstance(variant, str) else variant, status, len(ad), len(data), rpp,
                      passes, key_id) + nonce + tag
    return dst + src + struct.pack("!H", ETHERTYPE) + hdr + blocks(ad) + blocks(data)


def passes_expected(variant, alen, dlen, rpp):
    """The number of pipeline passes: the paper's formula (ASCON-128 v1.2, AD not empty) generalized to both variants
    and an empty AD, rounded up to whole passes."""
    rate, b = (8, 6) if variant == "v12" else (16, 8)
    rounds = 12 + (b * (alen // rate + 1) if alen else 0) + b * (dlen // rate) + 12
    return -(-rounds // rpp)
