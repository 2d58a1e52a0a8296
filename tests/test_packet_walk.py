"""scripts/packet-walk's counting: runs of consecutive lines in one file of the tree's crates, other files
left out without breaking a run, visits per file, returns = visits - files. (The walk itself needs a debug
build and gdb; `scripts/packet-walk` runs it.)"""
import importlib.machinery
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def load():
    loader = importlib.machinery.SourceFileLoader("packet_walk", str(ROOT / "scripts" / "packet-walk"))
    spec = importlib.util.spec_from_loader("packet_walk", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def test_runs_visits_and_returns():
    walk = load()
    t = "/tree"
    lines = [
        (f"{t}/crates/engine/src/pipeline/mod.rs", 10),
        (f"{t}/crates/engine/src/pipeline/mod.rs", 11),
        ("/rustc/abc/library/core/src/iter/range.rs", 5),  # left out, does not break the run
        (f"{t}/crates/engine/src/pipeline/mod.rs", 12),
        (f"{t}/crates/engine/src/pipeline/parser.rs", 40),
        (f"{t}/crates/engine/src/pipeline/mod.rs", 13),
        ("/elsewhere/crates/x.rs", 1),  # another tree's file: not this walk's
        (f"{t}/crates/externs/src/iface.rs", 7),
        (f"{t}/target/debug/build/gen.rs", 3),  # not under crates/
    ]
    runs, per_file, files, visits = walk.walk_counts(lines, t)
    assert [(r["file"], r["lines"], r["first_line"]) for r in runs] == [
        ("crates/engine/src/pipeline/mod.rs", 3, 10),
        ("crates/engine/src/pipeline/parser.rs", 1, 40),
        ("crates/engine/src/pipeline/mod.rs", 1, 13),
        ("crates/externs/src/iface.rs", 1, 7),
    ]
    assert per_file == {"crates/engine/src/pipeline/mod.rs": 2, "crates/engine/src/pipeline/parser.rs": 1,
                        "crates/externs/src/iface.rs": 1}
    assert (files, visits) == (3, 4)
    # a trailing slash on the tree changes nothing
    assert walk.walk_counts(lines, t + "/")[2:] == (3, 4)


def test_nothing_stepped_is_an_empty_walk():
    walk = load()
    assert walk.walk_counts([], "/tree") == ([], {}, 0, 0)


def test_the_stage_walk_merges_a_stage_s_files_in_both_layouts():
    walk = load()
    runs = [{"file": f} for f in [
        "crates/engine/src/pipeline/mod.rs", "crates/engine/src/pipeline/parser.rs", "crates/engine/src/pipeline/headers.rs",
        "crates/engine/src/code.rs",  # no stage: left out
        "crates/engine/src/pipeline/exec.rs", "crates/engine/src/load/statements.rs", "crates/engine/src/pipeline/match_action.rs",
        "crates/engine/src/tables/lookup.rs", "crates/engine/src/load/expressions.rs", "crates/engine/src/pipeline/call.rs",
        "crates/externs/src/p4/esp_sad/packet.rs", "crates/engine/src/pipeline/mod.rs",
    ]]
    assert walk.stage_walk(runs) == ["pipeline", "parser", "headers", "controls", "match-action", "controls", "externs", "pipeline"]
    before = [{"file": f} for f in ["crates/engine/src/pipeline.rs", "crates/engine/src/parser.rs", "crates/engine/src/compile.rs",
                                    "crates/engine/src/state.rs", "crates/engine/src/tables.rs", "crates/engine/src/call.rs"]]
    assert walk.stage_walk(before) == ["pipeline", "parser", "controls", "match-action", "externs"]
