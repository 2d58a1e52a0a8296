"""Shared fixtures: the p4sec binary, the shared conformance data and the p4sec-* commands."""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# the benchmarks and demos (bench/, outside the installed package) import as `bench.NAME` from the checkout
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def shared_root():
    """The shared corpora: $P4SEC_SHARED (relative to the checkout when relative), by default ../shared next to it."""
    return ROOT / os.environ.get("P4SEC_SHARED", "../shared")


def require_shared(rel=""):
    """The path `rel` inside the shared corpora. Where it is absent the calling test is skipped with one line naming
    the path and the variable; under CI=true that is a failure instead (CI must not pass by skipping)."""
    path = shared_root() / rel
    if path.exists():
        return path
    msg = f"shared corpus not found at {os.path.normpath(path)} (set P4SEC_SHARED; default ../shared next to the checkout)"
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"{msg}; CI=true: a missing corpus is a failure", pytrace=False)
    pytest.skip(msg)


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
    """The shared corpora's root, when it holds the conformance corpus (else the test is skipped; see require_shared)."""
    require_shared("conformance")
    return shared_root()
