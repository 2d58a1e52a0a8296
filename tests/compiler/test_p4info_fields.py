"""The P4Info that `p4sec compile` writes, compared field by field (order-independent) with the reference
compiler's for the production programs (../shared/conformance/production) and the reference corpus
(../shared/conformance/p4info-reference). Differences are printed one per line.

The shared corpora are read through P4SEC_SHARED (default ../shared); without them the tests skip with a
one-line message (and fail under CI=true)."""
import os
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from conftest import shared_root  # noqa: E402
from p4info_diff import compare  # noqa: E402

SHARED = shared_root()
PRODUCTION = SHARED / "conformance" / "production"
REFERENCE = SHARED / "conformance" / "p4info-reference"
PROGRAMS = ["pins/pins_middleblock", "pins/pins_fabric", "pins/pins_wbb", "dash/dash-pipeline-v1model-bmv2", "omec/up4",
            "fabric_20190420/fabric"]


def need(path):
    if not path.exists():
        msg = f"{path} not found (set P4SEC_SHARED to the shared data folder)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)


def ours(p4sec_bin, src, out, include=None):
    cmd = [str(p4sec_bin), "compile", str(src), "-o", str(out)]
    if include:
        cmd += ["-I", str(include)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{src} does not compile:\n{r.stderr}"
    return out / "p4info.txtpb"


@pytest.mark.parametrize("prog", PROGRAMS)
def test_production_program_p4info(p4sec_bin, tmp_path, prog):
    need(PRODUCTION)
    src = PRODUCTION / f"{prog}.p4"
    diffs = compare(ours(p4sec_bin, src, tmp_path, include=src.parent), PRODUCTION / f"{prog}.p4info.txtpb")
    print(f"{prog}: {len(diffs)} differences")
    print("\n".join(diffs))
    assert not diffs, f"{prog}: {len(diffs)} P4Info differences, first: {diffs[:10]}"


# Programs of the reference corpus whose P4Info still differs, with the reason. The test fails when another
# program differs, and when one of these no longer does (then remove it here).
KNOWN_DIFFERENT = {
    "issue1879-bmv2": "the reference writes an empty type_info for its checksum control; ours does not",
}


def version_difference(d):
    """p4c 1.2.4.8, which wrote the reference corpus, predates `initial_default_action` (the production
    programs' P4Info, from a later p4c, has it for every table): that field is not compared here."""
    return ".initial_default_action: only in ours" in d


def test_reference_corpus_p4info(p4sec_bin, tmp_path):
    need(REFERENCE)
    names = sorted(p.name[: -len(".p4info.txtpb")] for p in REFERENCE.glob("*.p4info.txtpb"))
    assert len(names) >= 100
    bad = {}
    for name in names:
        diffs = compare(ours(p4sec_bin, SHARED / "conformance" / "p4c-stf" / f"{name}.p4", tmp_path / name),
                        REFERENCE / f"{name}.p4info.txtpb")
        diffs = [d for d in diffs if not version_difference(d)]
        if diffs:
            bad[name] = diffs
    for name, diffs in bad.items():
        print(f"{name}: {len(diffs)} differences")
        print("\n".join("  " + d for d in diffs))
    unexpected = sorted(set(bad) - set(KNOWN_DIFFERENT))
    fixed = sorted(set(KNOWN_DIFFERENT) - set(bad))
    assert not unexpected, f"{len(unexpected)} of {len(names)} programs differ: {unexpected}"
    assert not fixed, f"now equal to the reference, remove from KNOWN_DIFFERENT: {fixed}"
