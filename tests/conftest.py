"""Shared fixtures: the p4sec binary and the shared conformance data."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = pathlib.Path(os.environ.get("P4SEC_SHARED", ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def p4sec_bin():
    exe = ROOT / "target" / "release" / "p4sec"
    if not exe.exists():
        subprocess.run(["cargo", "build", "--release", "--bin", "p4sec", "-q"], cwd=ROOT, check=True)
    return exe


@pytest.fixture(scope="session")
def shared():
    if not SHARED.exists():
        pytest.fail(f"shared data not found at {SHARED} (set P4SEC_SHARED)")
    return SHARED
