"""Control of programs/frame_auth.p4 (MACsec-like frame integrity between switches) over P4Runtime.

    p4sec-frameauth --program OUTDIR [--grpc ADDR] [--device-id N] [--election-id N] protect IN OUT --alg ALG --key HEX
    p4sec-frameauth --program OUTDIR ... verify IN OUT --alg ALG --key HEX
    p4sec-frameauth --program OUTDIR ... pass IN OUT
    p4sec-frameauth --program OUTDIR ... rekey protect|verify IN OUT --alg ALG --key HEX
    p4sec-frameauth --program OUTDIR ... show [--json]

A port is configured once (`protect`, `verify`, `pass`); `rekey` changes its key or algorithm and resets the
link's packet numbers: on a protecting port the PN of the egress link starts again at 1 (register `tx_pn`), on a
verifying port the anti-replay window is emptied (registers `rx_top`, `rx_window`). Rekey both ends of a link
together: frames in flight under the old key are dropped and counted as wrong tags. A protecting link whose
32-bit PN space is used up stops sending (counter `pn_exhausted`) until it is rekeyed.

OUTDIR is the compiled program (`p4sec compile programs/frame_auth.p4 -o OUTDIR`); it is pushed to the switch
unless the switch already runs it.
"""
import argparse
import json
import sys

from p4sec.runtime import Switch

ALGS = {"siphash": 0, "hmac-sha256": 1, "blake2b": 2}
# the cells of counter FaIngress.fa_stats, in order
STATS = ["tagged", "verified", "wrong_tag", "untagged", "already_tagged", "unknown_alg", "unconfigured", "replayed",
         "pn_exhausted"]
TABLE = "FaIngress.fa_port"


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


def _match(in_port):
    return {"sm.ingress_port": ("exact", _port(in_port).to_bytes(2, "big"))}


class FrameAuth:
    """The frame_auth configuration of one switch (a `p4sec.runtime.Switch` running frame_auth.p4)."""

    def __init__(self, sw):
        self.sw = sw

    def _set(self, role, in_port, out_port, alg, key, modify):
        params = {"port": _port(out_port), "alg": _alg(alg), "key": _key(key)}
        write = self.sw.table_modify if modify else self.sw.table_insert
        write(TABLE, _match(in_port), f"FaIngress.{role}", params)

    def protect(self, in_port, out_port, alg, key):
        """Frames arriving on `in_port` leave on `out_port` numbered and tagged."""
        self._set("protect", in_port, out_port, alg, key, modify=False)

    def verify(self, in_port, out_port, alg, key):
        """Frames arriving on `in_port` must carry a valid tag and a fresh PN; they leave on `out_port` untagged."""
        self._set("verify", in_port, out_port, alg, key, modify=False)

    def passthrough(self, in_port, out_port):
        self.sw.table_insert(TABLE, _match(in_port), "FaIngress.pass", {"port": _port(out_port)})

    def rekey(self, role, in_port, out_port, alg, key):
        """New key (and algorithm) for a configured port, and its link's packet numbers reset, in one Write."""
        if role not in ("protect", "verify"):
            raise FrameAuthError(f"role must be protect or verify, not {role!r}")
        with self.sw.batch():
            self._set(role, in_port, out_port, alg, key, modify=True)
            if role == "protect":
                self.sw.register_write("FaIngress.tx_pn", _port(out_port), 0)
            else:
                self.sw.register_write("FaIngress.rx_top", _port(in_port), 0)
                self.sw.register_write("FaIngress.rx_window", _port(in_port), 0)

    def last_pn(self, out_port):
        """The last packet number sent on a protected egress link."""
        return self.sw.register_read("FaIngress.tx_pn", _port(out_port))

    def stats(self):
        """{counter name: packets} of the frame_auth counter."""
        return {name: self.sw.counter_read("FaIngress.fa_stats", i)[0] for i, name in enumerate(STATS)}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="p4sec-frameauth", description=__doc__.split("\n\n")[0])
    ap.add_argument("--grpc", default="127.0.0.1:9559")
    ap.add_argument("--device-id", type=int, default=1)
    ap.add_argument("--election-id", type=int, default=1, help="P4Runtime election id (above any other controller's to write)")
    ap.add_argument("--program", required=True, help="the compiled frame_auth.p4 (p4sec compile ... -o OUTDIR)")
    sub = ap.add_subparsers(dest="cmd", required=True)

    def port_args(p, with_key=True):
        p.add_argument("in_port", type=int)
        p.add_argument("out_port", type=int)
        if with_key:
            p.add_argument("--alg", default="siphash", choices=list(ALGS))
            p.add_argument("--key", required=True, help="128-bit key, 32 hex digits")

    port_args(sub.add_parser("protect", help="number and tag frames from IN, send them on OUT"))
    port_args(sub.add_parser("verify", help="check and strip tags of frames from IN, send them on OUT"))
    port_args(sub.add_parser("pass", help="forward frames from IN to OUT unprotected"), with_key=False)
    r = sub.add_parser("rekey", help="new key for a configured port; reset its link's packet numbers")
    r.add_argument("role", choices=["protect", "verify"])
    port_args(r)
    s = sub.add_parser("show", help="print the counters")
    s.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        sw = Switch(a.grpc, device_id=a.device_id, election_id=a.election_id)
        if not sw.adopt(a.program):
            sw.push(a.program)
        fa = FrameAuth(sw)
        if a.cmd in ("protect", "verify"):
            getattr(fa, a.cmd)(a.in_port, a.out_port, a.alg, a.key)
        elif a.cmd == "pass":
            fa.passthrough(a.in_port, a.out_port)
        elif a.cmd == "rekey":
            fa.rekey(a.role, a.in_port, a.out_port, a.alg, a.key)
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
