"""Control of programs/frame_auth.p4 (MACsec-like frame integrity between switches) over P4Runtime.

    p4sec-frameauth --program OUTDIR [--grpc ADDR] [--device-id N] [--election-id N] protect IN OUT --alg ALG --key HEX [--an N]
    p4sec-frameauth --program OUTDIR ... verify IN OUT --alg ALG --key HEX [--an N]
    p4sec-frameauth --program OUTDIR ... pass IN OUT
    p4sec-frameauth --program OUTDIR ... rekey protect|verify IN OUT --alg ALG --key HEX --an N
    p4sec-frameauth --program OUTDIR ... retire IN --an N
    p4sec-frameauth --program OUTDIR ... show [--json]

A port is configured once (`protect`, `verify`, `pass`). Keys belong to associations, as in MACsec: a link has
up to four (AN 0..3), each with its own key, packet numbers and replay window, and every frame names the
association it was tagged under. A key change loses no frames when it follows this order:

1. on the receiving switch, `rekey verify IN OUT --an NEW ...` installs the new association next to the old one
   (its anti-replay window starts empty);
2. on the sending switch, `rekey protect IN OUT --an NEW ...` sends under the new association from the next
   frame on (its PNs start again at 1);
3. on the receiving switch, `retire IN --an OLD` once the frames under the old association have arrived.

Each step is one P4Runtime Write (the table entry and the reset of the association's PN or window registers).
A protecting link whose 32-bit PN space is used up stops sending (counter `pn_exhausted`) until it moves to a
new association.

OUTDIR is the compiled program (`p4sec compile programs/frame_auth.p4 -o OUTDIR`); it is pushed to the switch
unless the switch already runs it.
"""
import argparse
import json
import sys

from p4sec.infra.runtime import Switch

ALGS = {"siphash": 0, "hmac-sha256": 1, "blake2b": 2}
# the cells of counter FaIngress.fa_stats, in order
STATS = ["tagged", "verified", "wrong_tag", "untagged", "already_tagged", "unknown_alg", "unconfigured", "replayed",
         "pn_exhausted", "no_association"]
TABLE = "FaIngress.fa_port"
RX_TABLE = "FaIngress.fa_rx_sa"


class FrameAuthError(Exception):
    pass


def _key(key):
    if isinstance(key, str):
        try:
            key = bytes.fromhex(key)
        except ValueError as e:
            raise FrameAuthError(f"the key must be hex digits: {e}") from None
    if len(key) != 16:
        raise FrameAuthError(f"the key must be 16 bytes (32 hex digits), not {len(key)}")
    return int.from_bytes(key, "big")


def _alg(alg):
    if alg not in ALGS:
        raise FrameAuthError(f"unknown algorithm {alg!r}: one of {', '.join(ALGS)}")
    return ALGS[alg]


def _port(p):
    if not 0 <= p < 511:
        raise FrameAuthError(f"port {p} is not a port of this switch (0..510)")
    return p


def _an(an):
    if not 0 <= an <= 3:
        raise FrameAuthError(f"association number {an} is not one of 0..3")
    return an


def _match(in_port):
    return {"sm.ingress_port": ("exact", _port(in_port).to_bytes(2, "big"))}


def _rx_match(in_port, an):
    return {"sm.ingress_port": ("exact", _port(in_port).to_bytes(2, "big")), "hdr.fa.an": ("exact", bytes([_an(an)]))}


def _index(port, an):
    """Index of an association's PN and window registers."""
    return _port(port) * 4 + _an(an)


class FrameAuth:
    """The frame_auth configuration of one switch (a `p4sec.runtime.Switch` running frame_auth.p4)."""

    def __init__(self, sw):
        self.sw = sw

    def _protect(self, in_port, out_port, alg, key, an, modify):
        params = {"port": _port(out_port), "alg": _alg(alg), "key": _key(key), "an": _an(an)}
        with self.sw.batch():
            write = self.sw.table_modify if modify else self.sw.table_insert
            write(TABLE, _match(in_port), "FaIngress.protect", params)
            self.sw.register_write("FaIngress.tx_pn", _index(out_port, an), 0)

    def protect(self, in_port, out_port, alg, key, an=0):
        """Frames arriving on `in_port` leave on `out_port` numbered and tagged under association `an`."""
        self._protect(in_port, out_port, alg, key, an, modify=False)

    def verify(self, in_port, out_port, alg, key, an=0):
        """Frames arriving on `in_port` must carry a valid tag of one of the port's associations (this one, `an`,
        to begin with) and a fresh PN; they leave on `out_port` untagged."""
        with self.sw.batch():
            self.sw.table_insert(TABLE, _match(in_port), "FaIngress.verify", {"port": _port(out_port)})
            self.install_rx(in_port, an, alg, key)

    def passthrough(self, in_port, out_port):
        self.sw.table_insert(TABLE, _match(in_port), "FaIngress.pass", {"port": _port(out_port)})

    def _has_rx(self, in_port, an):
        return self.sw.table_get(RX_TABLE, _rx_match(in_port, an)) is not None

    def install_rx(self, in_port, an, alg, key):
        """The key of receive association `an` on a verifying port (added next to the others, or replaced), and
        its anti-replay window emptied, in one Write."""
        modify = self._has_rx(in_port, an)
        with self.sw.batch():
            write = self.sw.table_modify if modify else self.sw.table_insert
            write(RX_TABLE, _rx_match(in_port, an), "FaIngress.rx_sa", {"alg": _alg(alg), "key": _key(key)})
            self.sw.register_write("FaIngress.rx_top", _index(in_port, an), 0)
            self.sw.register_write("FaIngress.rx_window", _index(in_port, an), 0)

    def retire(self, in_port, an):
        """Remove receive association `an` of a verifying port: frames still tagged under it are dropped."""
        if not self._has_rx(in_port, an):
            raise FrameAuthError(f"port {in_port} has no receive association {an}")
        self.sw.table_delete(RX_TABLE, _rx_match(in_port, an))

    def rekey(self, role, in_port, out_port, alg, key, an):
        """`verify`: install (or replace) receive association `an`; `protect`: send under association `an`, with
        this key, from the next frame on, its PNs starting again at 1. See the module documentation for the order
        that loses no frames."""
        if role == "protect":
            now = self.sw.table_get(TABLE, _match(in_port))
            if now is None or now[0] != "FaIngress.protect":
                raise FrameAuthError(f"port {in_port} is not a protecting port")
            if now[1]["an"] == _an(an):
                # the receiver would take the restarted PNs for replays of the old key's frames
                raise FrameAuthError(f"port {in_port} already sends under association {an}: rekey to another one (0..3)")
            self._protect(in_port, out_port, alg, key, an, modify=True)
        elif role == "verify":
            self.install_rx(in_port, an, alg, key)
        else:
            raise FrameAuthError(f"role must be protect or verify, not {role!r}")

    def last_pn(self, out_port, an=0):
        """The last packet number sent under association `an` on a protected egress link."""
        return self.sw.register_read("FaIngress.tx_pn", _index(out_port, an))

    def stats(self):
        """{counter name: packets} of the frame_auth counter."""
        return {name: self.sw.counter_read("FaIngress.fa_stats", i)[0] for i, name in enumerate(STATS)}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="p4sec-frameauth", description=__doc__.split("\n\n")[0])
    ap.add_argument("--grpc", default="127.0.0.1:9559", metavar="HOST:PORT",
                    help="the switch's P4Runtime address (its --grpc) [default: 127.0.0.1:9559]")
    ap.add_argument("--device-id", type=int, default=1, help="the switch's --device-id [default: 1]")
    ap.add_argument("--election-id", type=int, default=1, help="P4Runtime election id (above any other controller's to write)")
    ap.add_argument("--program", required=True, help="the compiled frame_auth.p4 (p4sec compile ... -o OUTDIR)")
    sub = ap.add_subparsers(dest="cmd", required=True)

    def port_args(p, with_key=True, an_required=False):
        p.add_argument("in_port", type=int)
        p.add_argument("out_port", type=int)
        if with_key:
            p.add_argument("--alg", default="siphash", choices=list(ALGS))
            p.add_argument("--key", required=True, help="128-bit key, 32 hex digits")
            p.add_argument("--an", type=int, required=an_required, default=None if an_required else 0,
                           help="association number 0..3")

    port_args(sub.add_parser("protect", help="number and tag frames from IN, send them on OUT"))
    port_args(sub.add_parser("verify", help="check and strip tags of frames from IN, send them on OUT"))
    port_args(sub.add_parser("pass", help="forward frames from IN to OUT unprotected"), with_key=False)
    r = sub.add_parser("rekey", help="verify: install association AN next to the others; protect: send under AN from now on")
    r.add_argument("role", choices=["protect", "verify"])
    port_args(r, an_required=True)
    t = sub.add_parser("retire", help="remove receive association AN of a verifying port")
    t.add_argument("in_port", type=int)
    t.add_argument("--an", type=int, required=True)
    s = sub.add_parser("show", help="print the counters")
    s.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        sw = Switch(a.grpc, device_id=a.device_id, election_id=a.election_id)
        if not sw.adopt(a.program):
            sw.push(a.program)
        fa = FrameAuth(sw)
        if a.cmd in ("protect", "verify"):
            getattr(fa, a.cmd)(a.in_port, a.out_port, a.alg, a.key, a.an)
        elif a.cmd == "pass":
            fa.passthrough(a.in_port, a.out_port)
        elif a.cmd == "rekey":
            fa.rekey(a.role, a.in_port, a.out_port, a.alg, a.key, a.an)
        elif a.cmd == "retire":
            fa.retire(a.in_port, a.an)
        else:
            st = fa.stats()
            print(json.dumps(st) if a.json else "\n".join(f"{k:>15} {v}" for k, v in st.items()))
        sw.close()
    except (FrameAuthError, ValueError) as e:
        print(f"p4sec-frameauth: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # a refused write (WriteError) or an unreachable switch
        print(f"p4sec-frameauth: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
