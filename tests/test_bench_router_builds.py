"""python -m bench.router_builds: `p4sec bench` of two builds taking turns (here the same build under two labels),
the medians per build, the compared build's install and forwarding rates as ratios of the first's, and bad
options refused."""
import json

import pytest

from bench import router_builds


def test_two_builds_take_turns_and_their_ratios_are_printed(tmp_path, p4sec_bin, capsys):
    out = tmp_path / "builds.json"
    rc = router_builds.main(["--p4sec", str(p4sec_bin), "--compare", f"again={p4sec_bin}", "--rounds", "2",
                             "--routes", "400", "--vrfs", "3", "--seconds", "0.1", "--json", str(out)])
    assert rc == 0
    rows = json.loads(out.read_text())
    assert [r["build"] for r in rows] == ["p4sec", "again"]
    for r in rows:
        assert r["rounds"] == 2
        for k in ("route_insert_per_s", "route_insert_per_s_native", "jit_pps", "native_pps"):
            assert r[k] > 0, r
        assert r["jit_over_native"] > 0, r
    again = rows[1]
    for k in ("route_insert_per_s", "route_insert_per_s_native", "jit_pps"):
        assert again[f"{k}_vs_p4sec"] == pytest.approx(again[k] / rows[0][k])
    text = capsys.readouterr().out
    assert "2 builds taking turns, 2 rounds, 400 routes in 3 VRFs" in text
    assert "again / p4sec: installs closure " in text


def test_a_failing_build_is_reported(tmp_path, capsys):
    bad = tmp_path / "p4sec-bad"
    bad.write_text("#!/bin/sh\necho broken >&2\nexit 3\n")
    bad.chmod(0o755)
    rc = router_builds.main(["--p4sec", str(bad), "--compare", f"other={bad}", "--rounds", "1"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "failed (3): broken" in err


@pytest.mark.parametrize("args, error", [
    ([], "--compare LABEL=PATH: at least one other build"),
    (["--compare", "nolabel"], "--compare: `nolabel` is not LABEL=PATH"),
    (["--compare", "x=/no/such/p4sec"], "--compare: `/no/such/p4sec` is not a file"),
    (["--compare", "p4sec=/bin/sh"], "--compare: the label `p4sec` is taken"),
    (["--compare", "x=/bin/sh", "--rounds", "0"], "--rounds and --routes take at least 1"),
])
def test_bad_options_are_refused(args, error, p4sec_bin, capsys):
    with pytest.raises(SystemExit) as e:
        router_builds.main(["--p4sec", str(p4sec_bin), *args])
    assert e.value.code == 2
    assert error in capsys.readouterr().err


def test_figures_an_older_build_does_not_print_are_shown_as_missing(tmp_path, p4sec_bin, capsys):
    # an "older build" whose JSON has the closure engine's install rate only (as builds before the native engine)
    old = tmp_path / "p4sec-old"
    old.write_text('#!/bin/sh\nwhile [ "$1" != "--json" ]; do shift; done\n'
                   'echo \'{"route_insert_per_s": 1000000.0, "agree": 4096, "packets_checked": 4096}\' > "$2"\n')
    old.chmod(0o755)
    out = tmp_path / "b.json"
    rc = router_builds.main(["--p4sec", str(p4sec_bin), "--compare", f"old={old}", "--rounds", "1", "--routes", "300",
                             "--seconds", "0.1", "--json", str(out)])
    assert rc == 0
    rows = json.loads(out.read_text())
    assert rows[1]["route_insert_per_s"] == 1_000_000.0
    assert rows[1]["jit_pps"] is None and rows[1]["jit_pps_vs_p4sec"] is None
    assert rows[1]["route_insert_per_s_vs_p4sec"] == pytest.approx(1e6 / rows[0]["route_insert_per_s"])
    text = capsys.readouterr().out
    assert "native -; native forwarding -" in text


def test_the_ipv6_router_is_compared_with_ipv6(tmp_path, p4sec_bin, capsys):
    out = tmp_path / "v6.json"
    rc = router_builds.main(["--p4sec", str(p4sec_bin), "--compare", f"again={p4sec_bin}", "--rounds", "1",
                             "--routes", "300", "--ipv6", "--seconds", "0.1", "--json", str(out)])
    assert rc == 0
    rows = json.loads(out.read_text())
    assert all(r["jit_pps"] > 0 and r["route_insert_per_s_native"] > 0 for r in rows), rows
    assert "1 rounds, IPv6, 300 routes;" in capsys.readouterr().out


def test_ipv6_and_vrfs_are_refused_together(p4sec_bin, capsys):
    with pytest.raises(SystemExit) as e:
        router_builds.main(["--p4sec", str(p4sec_bin), "--compare", "x=/bin/sh", "--ipv6", "--vrfs", "2"])
    assert e.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
