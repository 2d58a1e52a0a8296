"""Authenticated in-band control for programs/inband_kv_cache.p4 (P4EAD): build, send and verify control packets,
query the cache, provision sender keys over P4Runtime.

A control packet is the UDP payload (to port 8889)
    ctl_t   version (1) | op (1 = update) | count (u16) | sender (u32) | seq (u64)      -- clear, the AD
    body    key0 | value0 | key1 | value1 (u64 each, encrypted)                       -- up to two updates
    tag     16 bytes
with nonce = sender (u32) | 0 (u32) | seq (u64), ASCON-AEAD128 (NIST SP 800-232) or ASCON-128 v1.2.

The cipher is RustCrypto's, run by `p4sec ascon-serve` (the same code as the switch's extern) in a co-process.
"""
import argparse
import json
import os
import pathlib
import shutil
import socket
import struct
import subprocess
import sys
import threading
import zlib

CTL_PORT = 8889
KV_PORT = 8888
VARIANTS = {"aead128": 0, "v12": 1}
SLOTS = 65536
KV_GET, KV_PUT, KV_REPLY = 1, 2, 3
KV_HIT, KV_SERVER = 1, 2
CTL_STATS = ["accepted", "bad_tag", "replayed", "unknown_sender", "malformed", "passes"]


class InbandError(Exception):
    pass


class AuthError(InbandError):
    """The tag did not verify."""


def p4sec_binary():
    env = os.environ.get("P4SEC_BIN")
    if env:
        return env
    local = pathlib.Path(__file__).resolve().parents[2] / "target" / "release" / "p4sec"
    if local.exists():
        return str(local)
    found = shutil.which("p4sec")
    if not found:
        raise InbandError("cannot find the p4sec binary (set P4SEC_BIN or build with cargo build --release)")
    return found


class Aead:
    """ASCON-AEAD through a `p4sec ascon-serve` co-process (thread-safe)."""

    def __init__(self, binary=None):
        self.proc = subprocess.Popen([binary or p4sec_binary(), "ascon-serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.lock = threading.Lock()

    def _call(self, req):
        with self.lock:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        if not line:
            raise InbandError("p4sec ascon-serve ended")
        return json.loads(line)

    def seal(self, variant, key, nonce, ad, data):
        a = self._call({"op": "seal", "variant": variant, "key": key.hex(), "nonce": nonce.hex(), "ad": ad.hex(), "data": data.hex()})
        if "error" in a:
            raise InbandError(a["error"])
        return bytes.fromhex(a["data"]), bytes.fromhex(a["tag"])

    def open(self, variant, key, nonce, ad, data, tag):
        a = self._call({"op": "open", "variant": variant, "key": key.hex(), "nonce": nonce.hex(), "ad": ad.hex(), "data": data.hex(),
                        "tag": tag.hex()})
        if "error" in a:
            raise AuthError(a["error"]) if "verify" in a["error"] else InbandError(a["error"])
        return bytes.fromhex(a["data"])

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)


_shared = None


def shared_aead():
    global _shared
    if _shared is None:
        _shared = Aead()
    return _shared


def nonce_for(sender, seq):
    return struct.pack("!IIQ", sender, 0, seq)


def ctl_header(sender, seq, count, version=1, op=1):
    return struct.pack("!BBHIQ", version, op, count, sender, seq)


def body_of(updates):
    if len(updates) > 2:
        raise InbandError("a control packet holds at most two updates")
    words = []
    for k, v in updates:
        if not 0 < k < 1 << 64 or not 0 <= v < 1 << 64:
            raise InbandError(f"update ({k}, {v}): keys are 1..2^64-1, values 0..2^64-1")
        words += [k, v]
    words += [0] * (4 - len(words))
    return struct.pack("!4Q", *words)


def control_payload(key, variant, sender, seq, updates, auth=True, aead=None):
    """The UDP payload of a control packet carrying `updates` [(key, value)]; auth=False leaves the body clear
    (for the unauthenticated baseline build) with a zero tag."""
    if variant not in VARIANTS:
        raise InbandError(f"unknown variant {variant!r} (aead128 or v12)")
    ad = ctl_header(sender, seq, len(updates))
    body = body_of(updates)
    if not auth:
        return ad + body + bytes(16)
    ct, tag = (aead or shared_aead()).seal(variant, key, nonce_for(sender, seq), ad, body)
    return ad + ct + tag


def verify_control_payload(key, variant, payload, aead=None):
    """(sender, seq, [(key, value)]) of an authentic control packet; AuthError otherwise."""
    if len(payload) != 64:
        raise InbandError(f"a control packet is 64 bytes, not {len(payload)}")
    version, op, count, sender, seq = struct.unpack("!BBHIQ", payload[:16])
    if version != 1 or op != 1 or count > 2:
        raise InbandError(f"malformed control header (version {version}, op {op}, count {count})")
    body = (aead or shared_aead()).open(variant, key, nonce_for(sender, seq), payload[:16], payload[16:48], payload[48:])
    w = struct.unpack("!4Q", body)
    return sender, seq, [(w[2 * i], w[2 * i + 1]) for i in range(count)]


def slot_of(key):
    """The cache slot of a key, as the switch computes it (crc32 of the 8 key bytes mod SLOTS)."""
    return zlib.crc32(struct.pack("!Q", key)) % SLOTS


def kv_payload(op, key, value=0, req_id=0, status=0):
    return struct.pack("!BBHIQQ", op, status, 0, req_id, key, value)


def parse_kv(payload):
    op, status, _r, req_id, key, value = struct.unpack("!BBHIQQ", payload[:24])
    return {"op": op, "status": status, "req_id": req_id, "key": key, "value": value}


class Sender:
    """One in-band control sender: its id, key, variant and a sequence number that only grows."""

    def __init__(self, sender, key, variant="aead128", seq=0, auth=True, aead=None):
        self.sender, self.key, self.variant, self.seq, self.auth = sender, key, variant, seq, auth
        self.aead = aead

    def payloads(self, updates):
        """Control payloads for any number of updates, two per packet."""
        out = []
        for i in range(0, len(updates), 2):
            self.seq += 1
            out.append(control_payload(self.key, self.variant, self.sender, self.seq, updates[i:i + 2], self.auth, self.aead))
        return out

    def send(self, sock, address, updates):
        n = 0
        for p in self.payloads(updates):
            sock.sendto(p, (address, CTL_PORT))
            n += 1
        return n


def provision(switch, sender, key, variant="aead128", index=None, modify=False):
    """Install (or replace) a sender's key in ctl_senders over P4Runtime (`switch`: p4sec.runtime.Switch)."""
    params = {"key": key, "variant": VARIANTS[variant], "index": sender % 1024 if index is None else index}
    f = switch.table_modify if modify else switch.table_insert
    f("KvIngress.ctl_senders", {"hdr.ctl.sender": ("exact", struct.pack("!I", sender))}, "KvIngress.set_sender", params)


def _updates(items):
    out = []
    for it in items:
        k, sep, v = it.partition("=")
        if not sep:
            raise InbandError(f"`{it}`: an update is KEY=VALUE")
        out.append((int(k, 0), int(v, 0)))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="p4sec-inband", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p):
        p.add_argument("--key", required=True, help="the sender's 128-bit key, 32 hex digits")
        p.add_argument("--variant", default="aead128", choices=list(VARIANTS))

    b = sub.add_parser("build", help="print a control packet's UDP payload as hex")
    common(b)
    b.add_argument("--sender", type=int, required=True)
    b.add_argument("--seq", type=int, required=True)
    b.add_argument("updates", nargs="+", metavar="KEY=VALUE")
    s = sub.add_parser("send", help="send updates to a switch (UDP to port 8889), two per packet")
    common(s)
    s.add_argument("--sender", type=int, required=True)
    s.add_argument("--seq", type=int, required=True, help="the last sequence number used; packets use seq+1, seq+2, ...")
    s.add_argument("--to", required=True, help="destination IPv4 address (any address the switch sees)")
    s.add_argument("updates", nargs="+", metavar="KEY=VALUE")
    v = sub.add_parser("verify", help="verify and decode a control payload given as hex")
    common(v)
    v.add_argument("payload")
    p = sub.add_parser("provision", help="install a sender key on a switch over P4Runtime")
    common(p)
    p.add_argument("--sender", type=int, required=True)
    p.add_argument("--grpc", default="127.0.0.1:9559")
    p.add_argument("--device-id", type=int, default=1)
    p.add_argument("--p4info", required=True, help="p4info.txtpb of the running inband_kv_cache build")
    p.add_argument("--index", type=int, help="sequence register slot (default: sender mod 1024)")
    a = ap.parse_args(argv)
    try:
        key = bytes.fromhex(a.key)
        if len(key) != 16:
            raise InbandError("--key must be 16 bytes (32 hex digits)")
        if a.cmd == "build":
            print(control_payload(key, a.variant, a.sender, a.seq, _updates(a.updates)).hex())
        elif a.cmd == "send":
            snd = Sender(a.sender, key, a.variant, seq=a.seq)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                n = snd.send(sock, a.to, _updates(a.updates))
            print(f"sent {n} control packets, last seq {snd.seq}")
        elif a.cmd == "verify":
            sender, seq, ups = verify_control_payload(key, a.variant, bytes.fromhex(a.payload))
            print(json.dumps({"sender": sender, "seq": seq, "updates": ups}))
        elif a.cmd == "provision":
            from google.protobuf import text_format
            from p4.config.v1 import p4info_pb2
            from p4sec.infra.runtime import Switch
            sw = Switch(a.grpc, device_id=a.device_id)
            info = p4info_pb2.P4Info()
            text_format.Parse(pathlib.Path(a.p4info).read_text(), info)
            sw.p4info = info
            provision(sw, a.sender, key, a.variant, a.index)
            sw.close()
            print(f"sender {a.sender} provisioned")
    except (InbandError, ValueError) as e:
        print(f"p4sec-inband: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
