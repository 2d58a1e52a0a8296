"""The store benchmark (python -m bench.store) in its quick mode: a throwaway PostgreSQL and a throwaway etcd
started, the controller's operations measured on both, the figures written as JSON. Skipped with one line where
PostgreSQL, etcd or psycopg2 is missing (./scripts/setup installs them); under CI=true that is a failure."""
import json
import os
import subprocess
import sys

import pytest

from bench import store

OPS = ("commit_ms", "renew_ms", "takeover_ms", "read_state_ms")


def require_stores():
    missing = [what for what, ok in (("PostgreSQL (Debian: postgresql)", store.pg_bin()), ("etcd (Debian: etcd-server)", store.etcd_bin())) if not ok]
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        missing.append("psycopg2")
    if missing:
        msg = f"{', '.join(missing)} not installed (./scripts/setup installs them)"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"{msg}; CI=true: a missing store is a failure", pytrace=False)
        pytest.skip(msg)


def test_store_benchmark_quick(tmp_path):
    require_stores()
    out = tmp_path / "store.json"
    r = subprocess.run([sys.executable, "-m", "bench.store", "--quick", "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads(out.read_text())
    assert set(d) >= {"date", "machine", "params", "postgres", "etcd", "etcd_over_postgres"}
    assert d["params"] == {"iterations": 30, "tunnels": 1000, "takeovers": 2, "lease_s": 2.0}
    assert d["machine"]["cores"] >= 1 and d["date"].endswith("UTC")
    for s in ("postgres", "etcd"):
        for k in OPS:
            assert isinstance(d[s][k], (int, float)) and d[s][k] > 0, (s, k, d[s])
        # a takeover waits for the lease to end: it cannot take longer than the lease and a few polls
        assert d[s]["takeover_ms"] < 2000 + 1000, d[s]
    assert d["postgres"]["version"].startswith("PostgreSQL") and d["etcd"]["version"].startswith("etcd 3.")
    for k in OPS:
        assert d["etcd_over_postgres"][k] == pytest.approx(d["etcd"][k] / d["postgres"][k], rel=0.02, abs=0.01)
    assert "read state" in r.stdout and "etcd/PG" in r.stdout


def test_store_benchmark_refuses_bad_arguments():
    for args, word in ((["--lease", "0.5"], "--lease"), (["--tunnels", "0"], "--tunnels")):
        r = subprocess.run([sys.executable, "-m", "bench.store", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and word in r.stderr and "Traceback" not in r.stderr, r.stderr
