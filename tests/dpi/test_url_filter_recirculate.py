"""programs/url_filter.p4, the DeeP4R way: a cloned scanner consumes one payload byte per recirculation
through DFA tables written from p4sec-dpi output, while the original waits for the verdict."""
import pathlib

from p4sec import dpi
from tests.hashing.stf import Stf

from .test_url_filter_fast import dns, eth_ip, http, tls  # noqa: F401

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "programs" / "url_filter.p4"


def setup(domains):
    stf = Stf()
    dfa = dpi.Dfa(dpi.read_list("\n".join(domains)), payload=True)
    for mode, classes in ((0, dpi.CLASS_OF), (1, dpi.CLASS_OF_DNS)):
        for b, c in enumerate(classes):
            if c != 0:
                stf.add(f"add UfrIngress.byte_class hdr.label.mode:{mode} hdr.byte.b:{b} UfrIngress.set_class(cls:{c})")
    for s, c, t, blocked in dfa.entries():
        stf.add(f"add UfrIngress.dfa hdr.label.state:{s} meta.cls:{c} UfrIngress.step(next:{t}, blocked:{int(blocked)})")
    stf.add(f"add UfrEgress.dfa_start hdr.label.mode:0 UfrEgress.set_start(state:{dfa.delta[0].get(dpi.END, 0)})")
    stf.add("add UfrEgress.dfa_start hdr.label.mode:1 UfrEgress.set_start(state:0)")
    stf.add("add UfrIngress.ufr_port sm.ingress_port:1 UfrIngress.forward(port:2)")
    stf.add("mirroring_add 100 99")
    return stf


def test_blocked_names_are_dropped_others_pass_unchanged(p4sec_bin, tmp_path):
    stf = setup(["evil.com", "ads.tracker.net"])
    blocked = [http("evil.com"), http("WWW.EVIL.COM:8080"), tls("cdn.evil.com"), dns("x.ads.tracker.net")]
    passed = [http("notevil.com"), http("evil.com.example"), tls("evil.community"), dns("tracker.net")]
    for p in blocked:
        stf.packet(1, p)
    for p in passed:
        stf.packet(1, p)
        stf.expect(2, p)
    stf.packet(1, eth_ip() / b"\x01\x02")   # not TCP/UDP: forwarded without inspection
    stf.expect(2, eth_ip() / b"\x01\x02")
    stf.add(f"check_counter UfrIngress.ufr_stats(1) packets == {len(blocked)}")
    stf.add(f"check_counter UfrIngress.ufr_stats(0) packets == {len(passed)}")
    stf.add("check_counter UfrIngress.ufr_stats(2) packets == 1")
    stf.add("check_counter UfrIngress.ufr_stats(3) packets > 100")
    r = stf.run(p4sec_bin, PROGRAM, tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr


def test_the_paper_reset_table_would_miss_what_this_dfa_catches(p4sec_bin, tmp_path):
    # "a.b" is a false start inside "a.b.c"; the listed "b.c" follows (see tests/dpi/test_blocklist.py)
    stf = setup(["a.b", "b.c"])
    stf.packet(1, http("a.b.c"))
    stf.packet(1, http("a.bc"))
    stf.expect(2, http("a.bc"))
    stf.add("check_counter UfrIngress.ufr_stats(1) packets == 1")
    r = stf.run(p4sec_bin, PROGRAM, tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
