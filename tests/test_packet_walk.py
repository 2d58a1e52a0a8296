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


def test_the_pass_walk_names_each_stage_the_composer_enters(tmp_path):
    walk = load()
    t = tmp_path
    (t / "crates/engine/src/pipeline").mkdir(parents=True)
    (t / "crates/engine/src/pipeline/mod.rs").write_text(
        "fn pass() {\n    self.run_parser(w);\n    self.run_stage(w, &self.controls.ingress, n);\n"
        "    self.run_block(w, &self.deparser.block);\n}\nfn run_stage() {\n    b.run(self, w);\n}\n")
    mod, parser = f"{t}/crates/engine/src/pipeline/mod.rs", f"{t}/crates/engine/src/pipeline/parser.rs"
    stmts, code, tables = (f"{t}/crates/engine/src/load/statements.rs", f"{t}/crates/engine/src/code.rs",
                           f"{t}/crates/engine/src/tables/lookup.rs")
    headers, lib = f"{t}/crates/engine/src/pipeline/headers.rs", "/rustc/x/library/core/src/ptr.rs"
    lines = [
        (mod, 1, [(mod, 1)]),
        (parser, 10, [(mod, 2), (parser, 10)]),
        (parser, 11, [(mod, 2), (parser, 11)]),
        (mod, 3, [(mod, 3)]),  # the composer's own line: the parser's call has returned
        # the ingress control, run through a helper of the composer and the closures' runner (no stage):
        # its table apply is nested in it, not a visit of its own
        (code, 5, [(mod, 3), (mod, 7), (code, 5)]),
        (stmts, 20, [(mod, 3), (mod, 7), (code, 5), (stmts, 20)]),
        (tables, 30, [(mod, 3), (mod, 7), (code, 5), (stmts, 21), (tables, 30)]),
        (lib, 1, [(mod, 3), (mod, 7), (code, 5), (stmts, 21), (lib, 1)]),  # not the tree's: left out
        (code, 6, [(mod, 3), (mod, 7), (code, 6)]),  # the runner between statements: still the same call
        (stmts, 22, [(mod, 3), (mod, 7), (code, 6), (stmts, 22)]),
        (mod, 4, [(mod, 4)]),
        (headers, 40, [(mod, 4), (headers, 40)]),
        (parser, 12, []),  # stepped with no stack (an older walk's record): left out
    ]
    entries = walk.pass_walk(lines, t)
    assert [e[:3] for e in entries] == [
        ["parser", 2, "crates/engine/src/pipeline/parser.rs"],
        ["controls", 3, "crates/engine/src/load/statements.rs"],  # lines in stage files only
        ["headers", 1, "crates/engine/src/pipeline/headers.rs"],
    ]
    calls = [walk.call_text(t, e[3]) for e in entries]
    # the call that names the stage, not the composer's helper it goes through
    assert calls[1] == ("crates/engine/src/pipeline/mod.rs:3", "self.run_stage(w, &self.controls.ingress, n);")
    assert [walk.v1model_stage(code) for _, code in calls] == ["parser", "ingress", "deparser"]
    assert walk.v1model_stage("self.run_block(w, &self.code.egress);") == "egress"
    assert walk.v1model_stage("match b.run(self, w) {") == "?"
    # the same call site entered twice with the composer's line between: two visits
    again = lines[:4] + [(parser, 13, [(mod, 2), (parser, 13)])]
    assert [e[:2] for e in walk.pass_walk(again, t)] == [["parser", 2], ["parser", 1]]
