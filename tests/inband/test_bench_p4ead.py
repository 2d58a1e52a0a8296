"""Smoke test of `p4sec bench-p4ead`: P4EAD in plain P4 (1 to 4 rounds per pass) versus the extern, every build
and data length measured, pass counts by the paper's formula, and the extern faster than one round per pass."""
import json
import subprocess

from tests.inband.kat import passes_expected

BUILDS = {"rpp1": 1, "rpp2": 2, "rpp3": 3, "rpp4": 4, "extern": 0}
LENGTHS = [8, 16, 24, 32]


def test_bench_p4ead_smoke(p4sec_bin, tmp_path):
    out = tmp_path / "p4ead.json"
    r = subprocess.run([str(p4sec_bin), "bench-p4ead", "--seconds", "0.1", "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    j = json.loads(out.read_text())
    rows = {(row["build"], row["length"]): row for row in j["rows"]}
    assert len(j["rows"]) == len(rows) == len(BUILDS) * len(LENGTHS)
    for build, rpp in BUILDS.items():
        for length in LENGTHS:
            row = rows[(build, length)]
            assert row["rpp"] == rpp
            assert row["passes"] == (1 if rpp == 0 else passes_expected("v12", 4, length, rpp)), row
            assert row["pps"] > 0, row
            assert 0 < row["latency_us_median"] <= row["latency_us_p99"], row
    for length in LENGTHS:
        assert rows[("extern", length)]["pps"] > rows[("rpp1", length)]["pps"], length
    # the paper's figures where it gives them, null elsewhere
    assert rows[("rpp1", 8)]["paper_pps"] == 10e6 and rows[("rpp4", 8)]["paper_latency_us"] == 8.5
    assert rows[("rpp1", 32)]["paper_platform"] == "Tofino" and rows[("rpp2", 16)]["paper_pps"] is None
    assert {x["length"] for x in j["ratios"]} == set(LENGTHS)


def test_bench_p4ead_bad_arguments(p4sec_bin, tmp_path):
    for args in (["--seconds", "-1"], ["--seconds", "nan"], ["--seconds", "abc"],
                 ["--json", str(tmp_path / "missing" / "x.json")]):
        r = subprocess.run([str(p4sec_bin), "bench-p4ead", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and "panicked" not in r.stderr and r.stderr.strip(), (args, r.stderr)
