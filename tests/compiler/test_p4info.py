"""`p4sec compile` writes a P4Info with the reference compiler's names, ids, widths and match kinds,
so that standard P4Runtime clients work unchanged. Compared with the reference P4Info of every program
in the conformance corpus (read from $P4SEC_SHARED; skipped without it, see conftest.py)."""
import subprocess

import p4sec  # noqa: F401  (sets the protobuf runtime the p4runtime package needs)
import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2


def load(path):
    info = p4info_pb2.P4Info()
    text_format.Parse(path.read_text(), info)
    return info


def summary(info):
    tables = {}
    for t in info.tables:
        tables[t.preamble.name] = (
            t.preamble.id,
            [(m.id, m.name, m.bitwidth, m.match_type) for m in t.match_fields],
            sorted(a.id for a in t.action_refs),
            t.size,
        )
    actions = {a.preamble.name: (a.preamble.id, [(p.id, p.name, p.bitwidth) for p in a.params]) for a in info.actions}
    registers = {r.preamble.name: (r.preamble.id, r.size) for r in info.registers}
    counters = {c.preamble.name: (c.preamble.id, c.size) for c in info.counters}
    return tables, actions, registers, counters


def reference_programs(shared):
    ref = shared / "conformance" / "p4info-reference"
    return sorted(p.name[: -len(".p4info.txtpb")] for p in ref.glob("*.p4info.txtpb"))


def test_p4info_matches_reference_compiler(p4sec_bin, shared, tmp_path):
    names = reference_programs(shared)
    assert len(names) >= 100
    mismatches = []
    for name in names:
        out = tmp_path / name
        r = subprocess.run([str(p4sec_bin), "compile", str(shared / "conformance" / "p4c-stf" / f"{name}.p4"), "-o", str(out)],
                           capture_output=True, text=True)
        assert r.returncode == 0, f"{name}: {r.stderr}"
        ours = summary(load(out / "p4info.txtpb"))
        ref = summary(load(shared / "conformance" / "p4info-reference" / f"{name}.p4info.txtpb"))
        for kind, a, b in zip(("tables", "actions", "registers", "counters"), ours, ref):
            if a != b:
                mismatches.append((name, kind, a, b))
    # every table/action/register/counter must agree for at least 90% of the programs
    bad = sorted({m[0] for m in mismatches})
    detail = "\n".join(f"{n} {k}:\n  ours {a}\n  ref  {b}" for n, k, a, b in mismatches[:5])
    assert len(bad) * 10 <= len(names), f"{len(bad)} of {len(names)} programs differ: {bad}\n{detail}"


def test_compile_writes_program_and_p4info(p4sec_bin, tmp_path):
    src = p4sec.__file__  # any path; we compile the router program
    del src
    from conftest import ROOT
    r = subprocess.run([str(p4sec_bin), "compile", str(ROOT / "programs" / "ipv4_router.p4"), "-o", str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    info = load(tmp_path / "p4info.txtpb")
    t = [t for t in info.tables if t.preamble.name == "RouterIngress.ipv4_lpm"]
    assert t and t[0].match_fields[0].match_type == p4info_pb2.MatchField.LPM
    assert (tmp_path / "program.json").stat().st_size > 1000


@pytest.mark.parametrize("src,needle", [
    ("header h { bit<8> a }", ":1:"),
    ("#include <nonexistent.p4>", "cannot find include file"),
    ("#if 1\n", "missing #endif"),
    ("const bit<8> x = (((((1);", "expected"),
])
def test_bad_source_gives_located_error(p4sec_bin, tmp_path, src, needle):
    p = tmp_path / "bad.p4"
    p.write_text(src)
    r = subprocess.run([str(p4sec_bin), "compile", str(p), "-o", str(tmp_path / "o")], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert needle in r.stderr, r.stderr
    assert "panicked" not in r.stderr


def test_binary_p4info_equals_text_p4info(p4sec_bin, shared, tmp_path):
    """p4info.txtpb is p4info.binpb (the one P4Info message) in the text format: the same message, written
    exactly as the official protobuf library prints it."""
    from google.protobuf import text_format
    from conftest import ROOT
    programs = [ROOT / "programs" / "ipsec_gateway.p4", ROOT / "programs" / "ipv4_router.p4"]
    programs += sorted((shared / "conformance" / "p4c-stf").glob("*-bmv2.p4"))[:40]
    for prog in programs:
        out = tmp_path / prog.stem
        r = subprocess.run([str(p4sec_bin), "compile", str(prog), "-o", str(out)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        binary = p4info_pb2.P4Info.FromString((out / "p4info.binpb").read_bytes())
        assert binary == load(out / "p4info.txtpb"), prog.name
        assert (out / "p4info.txtpb").read_text() == text_format.MessageToString(binary), prog.name
