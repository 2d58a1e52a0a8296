"""The blocklist compiler (p4sec.dpi): label-bound, case-insensitive matching with a complete Aho-Corasick DFA,
checked against a direct reference and against the paper's reset-to-start table."""
import json
import random
import subprocess
import sys

import pytest

from p4sec import dpi


def blocked(domains, host):
    """Reference: a host name is blocked when it is a listed name or a subdomain of one."""
    host = host.lower()
    return any(host == d or host.endswith("." + d) for d in domains)


def test_label_boundaries_case_and_ports():
    dfa = dpi.Dfa(dpi.read_list("evil.com\n"))
    for host, want in [("evil.com", True), ("www.evil.com", True), ("a.b.evil.com", True), ("EVIL.COM", True),
                       ("Www.Evil.Com", True), ("notevil.com", False), ("evil.com.example", False), ("evil.co", False),
                       ("evil.comx", False), ("xevil.com", False), ("evil-com", False), ("com", False)]:
        assert dfa.run(host.encode()) is want, host
    # what ends a host name in HTTP Host headers and URLs ends the match too
    for tail in [b":8080", b"\r\n", b"/path", b" ", b"\x00"]:
        assert dfa.run(b"www.evil.com" + tail) is True
        assert dfa.run(b"www.evil.comx" + tail) is False


def test_overlapping_names_need_the_failure_links():
    domains = dpi.read_list("a.b\nb.c\n")
    dfa = dpi.Dfa(domains)
    naive = dpi.reset_to_start_dfa(domains)
    # ".a.b" is a false start for "a.b" in "a.b.c"; the listed "b.c" follows it
    assert dfa.run(b"a.b.c") is True
    assert naive(b"a.b.c") is False, "the reset-to-start table misses it (the paper's limitation)"
    assert blocked(domains, "a.b.c")


def test_agrees_with_the_reference_on_random_overlapping_names():
    rnd = random.Random(7)
    alphabet = "ab-."
    labels = ["a", "b", "ab", "ba", "a-b", "aa", "bb"]
    for _ in range(30):
        domains = list({".".join(rnd.choice(labels) for _ in range(rnd.randint(1, 3))) for _ in range(rnd.randint(1, 6))})
        dfa = dpi.Dfa(dpi.read_list("\n".join(domains)))
        for _ in range(300):
            host = ".".join(rnd.choice(labels) for _ in range(rnd.randint(1, 5)))
            assert dfa.run(host.encode()) == blocked(domains, host), (domains, host)
    del alphabet


def test_dns_query_names_in_wire_format():
    dfa = dpi.Dfa(dpi.read_list("evil.com\n"))

    def qname(host):
        return b"".join(bytes([len(l)]) + l.encode() for l in host.split(".")) + b"\x00"
    assert dfa.run(qname("www.evil.com"), dns=True) is True
    assert dfa.run(qname("evil.com"), dns=True) is True
    assert dfa.run(qname("notevil.com"), dns=True) is False
    assert dfa.run(qname("evil.com.example"), dns=True) is False


def test_internationalized_names_and_list_syntax():
    text = "# blocklist\n\nBücher.Example   # shop\n*.tracker.net\nevil.com.\nevil.com\n"
    domains = dpi.read_list(text)
    assert domains == ["xn--bcher-kva.example", "tracker.net", "evil.com"]
    dfa = dpi.Dfa(domains)
    assert dfa.run(b"www.xn--bcher-kva.example")
    assert dfa.run(b"ads.tracker.net")


@pytest.mark.parametrize("line,msg", [
    ("evil..com", "empty label"),
    ("ev il.com", "one domain per line"),
    ("evil_com.org", "cannot appear"),
    ("a" * 64 + ".com", "longer than 63"),
])
def test_bad_names_get_located_errors(line, msg):
    with pytest.raises(dpi.BlocklistError) as e:
        dpi.read_list("ok.com\n" + line + "\n", "list.txt")
    assert str(e.value).startswith("list.txt:2:") and msg in str(e.value)


def test_absorbing_verdict_and_entries():
    dfa = dpi.Dfa(["evil.com", "good.org"])
    entries = list(dfa.entries())
    assert all(t != 0 for _, _, t, _ in entries)
    assert any(b for *_, b in entries)
    # the table is complete: replaying the scan from the emitted entries (default: back to start) gives the same verdict
    table = {(s, c): (t, b) for s, c, t, b in entries}

    def run(data):
        s = table.get((0, dpi.DOT), (0, False))[0]
        for byte in list(data) + [None]:
            c = dpi.END if byte is None else dpi.CLASS_OF[byte]
            s, b = table.get((s, c), (0, False))
            if b:
                return True
        return False
    for host in ["evil.com", "x.evil.com", "good.org", "evil.org", "good.com", "a.good.org:80"]:
        assert run(host.encode()) == dfa.run(host.encode()) == blocked(["evil.com", "good.org"], host.split(":")[0])


def test_cli_compiles_a_list_and_reports(tmp_path):
    lst = tmp_path / "list.txt"
    lst.write_text("\n".join(dpi.generated_domains(5000)))
    out = tmp_path / "r.json"
    ent = tmp_path / "e.jsonl"
    r = subprocess.run([sys.executable, "-m", "p4sec.dpi", "compile", str(lst), "--json", str(out), "--entries", str(ent)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rep = json.loads(out.read_text())
    assert rep["domains"] == 5000 and rep["states"] > 5000 and rep["entries"] == sum(1 for _ in open(ent))
    bad = tmp_path / "bad.txt"
    bad.write_text("ok.com\nbad..com\n")
    r = subprocess.run([sys.executable, "-m", "p4sec.dpi", "compile", str(bad)], capture_output=True, text=True)
    assert r.returncode == 2 and "bad.txt:2:" in r.stderr
