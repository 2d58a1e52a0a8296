"""Shared fixtures: the p4sec binary, the shared conformance data and the p4sec-* commands."""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = pathlib.Path(os.environ.get("P4SEC_SHARED", ROOT.parent / "shared"))


def console_script(name):
    """The path of a `p4sec-*` command of the environment whose Python runs the tests (`.venv/bin` after
    scripts/setup), never one found on PATH (that could belong to another checkout)."""
    exe = pathlib.Path(sys.executable).parent / name
    if not exe.exists():
        raise FileNotFoundError(f"{exe} not found: install the package into this environment (./scripts/setup)")
    return str(exe)


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
