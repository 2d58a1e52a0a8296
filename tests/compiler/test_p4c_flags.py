"""`p4sec compile` with the reference compiler's command line: a Makefile written for p4c (or p4c-bm2-ss, as the
P4 tutorials call it) works unchanged with P4C pointing at p4sec. The P4Info comes out in the format each
--p4runtime-files name asks for (text, JSON, binary), all three the same P4Info."""
import json
import shutil
import subprocess

import p4sec  # noqa: F401  (sets the protobuf runtime the p4runtime package needs)
import pytest
from google.protobuf import json_format, text_format
from p4.config.v1 import p4info_pb2

from conftest import ROOT

MAKEFILE = """\
# as written for the reference compiler
P4C ?= p4c
BUILD_DIR = build
P4C_ARGS = --target bmv2 --arch v1model --std p4-16 --emit-externs -I include -DROUTES=1024 \\
	--p4runtime-files $(BUILD_DIR)/$*.p4info.txt,$(BUILD_DIR)/$*.p4info.json,$(BUILD_DIR)/$*.p4info.bin

all: $(BUILD_DIR)/router.json tutorial outdir

$(BUILD_DIR)/%.json: %.p4
\tmkdir -p $(BUILD_DIR)
\t$(P4C) $(P4C_ARGS) -o $@ $<

# the P4 tutorials' utils/Makefile (p4c-bm2-ss)
tutorial: router.p4
\tmkdir -p tut
\t$(P4C) --p4v 16 --p4runtime-files tut/router.p4info.txtpb -o tut/router.json router.p4

# an output directory, as `p4c -o DIR` takes it
outdir: router.p4
\t$(P4C) --target bmv2 --arch v1model -o out router.p4
"""


def p4info_files(build, stem):
    text = text_format.Parse((build / f"{stem}.p4info.txt").read_text(), p4info_pb2.P4Info())
    binary = p4info_pb2.P4Info.FromString((build / f"{stem}.p4info.bin").read_bytes())
    js = json_format.Parse((build / f"{stem}.p4info.json").read_text(), p4info_pb2.P4Info())
    return text, binary, js


@pytest.fixture
def project(tmp_path):
    shutil.copy(ROOT / "programs" / "ipv4_router.p4", tmp_path / "router.p4")
    (tmp_path / "include").mkdir()
    (tmp_path / "Makefile").write_text(MAKEFILE)
    return tmp_path


def test_makefile_for_p4c_works_with_p4sec(p4sec_bin, project):
    r = subprocess.run(["make", f"P4C={p4sec_bin} compile"], cwd=project, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    build = project / "build"
    program = json.loads((build / "router.json").read_text())
    text, binary, js = p4info_files(build, "router")
    assert binary == text == js
    assert {t.preamble.name for t in text.tables} >= {"RouterIngress.ipv4_lpm"}, text
    # the JSON is the protobuf JSON mapping, as the reference compiler writes it
    raw = json.loads((build / "router.p4info.json").read_text())
    assert raw == json_format.MessageToDict(binary)
    assert "pkgInfo" in raw and isinstance(raw["tables"][0]["preamble"]["id"], int)
    # the tutorial's p4c-bm2-ss line, and -o DIR: the program named after the source
    assert json.loads((project / "tut" / "router.json").read_text()) == program
    assert text_format.Parse((project / "tut" / "router.p4info.txtpb").read_text(), p4info_pb2.P4Info()) == text
    assert json.loads((project / "out" / "router.json").read_text()) == program
    # the switch runs the program file as written
    assert "wrote" in r.stdout


def test_p4runtime_file_with_explicit_format(p4sec_bin, project):
    r = subprocess.run([str(p4sec_bin), "compile", "--p4runtime-file", "info.out", "--p4runtime-format", "json", "-o", "prog.json",
                        "router.p4"], cwd=project, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json_format.Parse((project / "info.out").read_text(), p4info_pb2.P4Info()).tables


@pytest.mark.parametrize("args,needle", [
    (["--frobnicate"], "--frobnicate"),
    (["--target", "tofino"], "tofino"),
    (["--arch", "psa"], "psa"),
    (["--std", "p4-14"], "p4-14"),
    (["--p4runtime-files", "x.yaml"], "x.yaml"),
    (["--p4runtime-format", "xml", "--p4runtime-file", "x"], "xml"),
])
def test_bad_flags_are_named(p4sec_bin, project, args, needle):
    r = subprocess.run([str(p4sec_bin), "compile", *args, "-o", "build", "router.p4"], cwd=project, capture_output=True, text=True)
    assert r.returncode != 0
    assert needle in r.stderr, r.stderr
    assert "panicked" not in r.stderr
