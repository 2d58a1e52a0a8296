"""python -m bench.instructions: instructions per packet through Engine::process under callgrind, on both
engines. The callgrind reading on a made-up output, one real short run on both engines (the gateway) and one on
one engine for each of the other pipelines (the URL filter, the keyed Bloom filter, whole-frame SipHash, the router: both engines
emit the same frames there, crates/cli/tests/bench_engines_fixed.rs), and bad options."""
import json

import pytest

from bench import instructions


def test_process_cost_sums_every_call_site_of_process():
    text = "\n".join([
        "fn=main",
        "cfn=p4sec_engine::pipeline::<impl p4sec_engine::engine::Engine>::process",
        "calls=300 53",
        "329 7000",
        "cfn=other::thing",
        "calls=9 1",
        "1 555",
        "fn=warm_up",
        "cfn=p4sec_engine::pipeline::<impl p4sec_engine::engine::Engine>::process",
        "calls=4 10",
        "12 200",
    ])
    assert instructions.process_cost(text) == (304, 7200, 0)
    assert instructions.process_cost("fn=main\n") == (0, 0, 0)


def test_extern_cost_counts_calls_from_the_engine_into_the_externs_only():
    e, x, b = "/t/crates/engine/src", "/t/crates/externs/src", "/t/crates/bench/src"
    text = "\n".join([
        f"fl={b}/esp.rs",
        "fn=bench::run",
        "cfn=p4sec_engine::pipeline::<impl p4sec_engine::engine::Engine>::process",
        "calls=10 1",
        "5 9000",
        # the bench's own call of an extern (checking the output): not the engine's
        f"cfi={x}/esp_sad.rs",
        "cfn=<p4sec_externs::p4::esp_sad::bound::BoundDecap as p4sec_externs::iface::BoundCall>::call",
        "calls=10 1",
        "6 700",
        f"fl={e}/pipeline/mod.rs",
        "fn=process",
        f"fi={e}/pipeline/call/externs.rs",
        f"cfi={x}/p4/esp_sad/bound.rs",
        "cfn=<p4sec_externs::p4::esp_sad::bound::BoundEncapSplit as p4sec_externs::iface::BoundCall>::call",
        "calls=10 1",
        "253 4000",
        # a call inside the engine (no cfi: the caller's file)
        "cfn=p4sec_engine::tables::lookup",
        "calls=10 1",
        "254 300",
        # a helper of the externs' crate doing the engine's own work (a checksum): the P4 part
        f"cfi={x}/checksum.rs",
        "cfn=p4sec_externs::checksum::csum16_without",
        "calls=10 1",
        "255 800",
        # an extern object's method call
        f"cfi={x}/hash.rs",
        "cfn=<p4sec_externs::hash::Siphash as p4sec_externs::iface::ExternObject>::call",
        "calls=10 1",
        "256 1000",
        # an extern's call of its own helpers: already inside the count above
        f"fl={x}/p4/esp_sad/bound.rs",
        "fn=<p4sec_externs::p4::esp_sad::bound::BoundEncapSplit as p4sec_externs::iface::BoundCall>::call",
        f"cfi={x}/esp/sa/encrypt.rs",
        "cfn=seal",
        "calls=10 1",
        "9 2500",
    ])
    assert instructions.process_cost(text) == (10, 9000, 5000)


def test_a_short_run_measures_both_engines(tmp_path, p4sec_bin, capsys):
    out = tmp_path / "instr.json"
    rows = instructions.main(["--packets", "40", "--only", "esp-enc-null", "--json", str(out), "--p4sec", str(p4sec_bin)])
    assert [r["pipeline"] for r in rows] == ["esp-enc-null"]
    doc = json.loads(out.read_text())
    r = doc["rows"][0]
    # a packet through the gateway takes thousands of instructions on either engine, not zero nor millions
    for e in ("closure", "native"):
        assert 500 < r[f"{e}_instructions_per_packet"] < 200_000, r
    assert r["native_over_closure"] == pytest.approx(r["native_instructions_per_packet"] / r["closure_instructions_per_packet"])
    # the ESP extern's framing runs inside every packet's count, on both engines alike; the P4 part is the rest
    for e in ("closure", "native"):
        assert 100 < r[f"{e}_extern_instructions_per_packet"] < r[f"{e}_instructions_per_packet"], r
        assert r[f"{e}_p4_instructions_per_packet"] == pytest.approx(
            r[f"{e}_instructions_per_packet"] - r[f"{e}_extern_instructions_per_packet"])
    assert r["closure_extern_instructions_per_packet"] == pytest.approx(r["native_extern_instructions_per_packet"], rel=0.05)
    assert r["p4_speedup"] == pytest.approx(r["closure_p4_instructions_per_packet"] / r["native_p4_instructions_per_packet"])
    assert "P4 part closure/native" in capsys.readouterr().out


# the closure engine only (no Cranelift compile under valgrind) and few packets, to keep each run of callgrind (two per test) short
@pytest.mark.parametrize("pipeline, engine, low, high", [
    ("url-filter", "closure", 500, 50_000),
    ("keyed-bloom", "closure", 500, 50_000),
    ("hash-frames", "closure", 300, 50_000),
    ("router", "closure", 200, 20_000),
])
def test_the_other_pipelines_run_exactly_their_packets(pipeline, engine, low, high, p4sec_bin, monkeypatch):
    if pipeline == "router":
        # 500 routes instead of 10,000: installing them is most of a short run's time under callgrind
        rows = [(n, w, ["bench", "--routes", "500"] if n == "router" else cmd) for n, w, cmd in instructions.PIPELINES]
        assert rows != instructions.PIPELINES
        monkeypatch.setattr(instructions, "PIPELINES", rows)
    rows = instructions.main(["--packets", "20", "--only", pipeline, "--engines", engine, "--p4sec", str(p4sec_bin)])
    assert [r["pipeline"] for r in rows] == [pipeline]
    # no ratio with one engine
    assert set(rows[0]) == {"pipeline", "what", f"{engine}_instructions_per_packet", f"{engine}_extern_instructions_per_packet",
                            f"{engine}_p4_instructions_per_packet"}
    assert low < rows[0][f"{engine}_instructions_per_packet"] < high, rows


@pytest.mark.parametrize("args, error", [
    (["--engines", "jit"], "--engines: unknown engine `jit`"),
    (["--only", "url-filter,dash"], "--only: unknown pipeline `dash`"),
    (["--packets", "0"], "--packets: at least 1"),
])
def test_bad_options_are_refused(args, error, capsys):
    with pytest.raises(SystemExit) as e:
        instructions.main(args)
    assert e.value.code == 2
    assert error in capsys.readouterr().err
