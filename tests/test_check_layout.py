"""scripts/check-layout on small synthetic crates: a module cycle (direct, through a re-export, through a child
module's name, three modules long) fails the check and is printed with file:line per step; a tree without one
passes, although it has comments, strings, `pub use` facades and test modules that name modules back."""
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "scripts" / "check-layout"


def tree(tmp_path, files):
    (tmp_path / "crates" / "a").mkdir(parents=True)
    (tmp_path / "crates" / "a" / "Cargo.toml").write_text('[package]\nname = "a"\n')
    for rel, text in files.items():
        p = tmp_path / "crates" / "a" / "src" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def run(root, *args):
    r = subprocess.run([sys.executable, str(SCRIPT), *args, str(root)], capture_output=True, text=True)
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, r.stdout


def test_two_modules_naming_each_other_fail(tmp_path):
    root = tree(tmp_path, {
        "lib.rs": "//! root\nmod a;\nmod b;\n",
        "a.rs": "//! a\nuse crate::b::B;\npub struct A(B);\n",
        "b.rs": "//! b\npub struct B;\npub fn f() -> Option<crate::a::A> { None }\n",
    })
    rc, out = run(root)
    assert rc == 1, out
    assert "crates/a/src/a.rs:2 names crates/a/src/b.rs" in out
    assert "crates/a/src/b.rs:3 names crates/a/src/a.rs" in out
    assert "1 module cycle(s)" in out


def test_cycle_through_the_root_and_a_child_name(tmp_path):
    # the root calls into a child by its name; the child takes a helper back from the root
    root = tree(tmp_path, {
        "lib.rs": "//! root\nmod ring;\npub fn helper() {}\npub fn run() { ring::go() }\n",
        "ring.rs": "//! ring\npub fn go() { super::helper() }\n",
    })
    rc, out = run(root)
    assert rc == 1, out
    assert "crates/a/src/lib.rs:4 names crates/a/src/ring.rs" in out
    assert "crates/a/src/ring.rs:2 names crates/a/src/lib.rs" in out


def test_cycle_through_a_reexport_and_three_modules(tmp_path):
    root = tree(tmp_path, {
        "lib.rs": "//! root\nmod a;\nmod b;\nmod c;\npub use c::C;\n",
        "a.rs": "//! a\nuse crate::b;\npub fn fa() { b::fb() }\n",
        "b.rs": "//! b\npub fn fb() { let _ = crate::C; }\n",   # crate::C is c::C
        "c.rs": "//! c\npub struct C;\nfn g() { crate::a::fa() }\n",
    })
    rc, out = run(root)
    assert rc == 1, out
    assert "crates/a/src/b.rs:2 names crates/a/src/c.rs" in out
    assert "crates/a/src/c.rs:3 names crates/a/src/a.rs" in out


def test_layered_tree_passes(tmp_path):
    root = tree(tmp_path, {
        # the root only declares and re-exports: a facade, not a use
        "lib.rs": "//! root\nmod a;\nmod b;\nmod net;\npub use a::A;\npub use net::{ring::Ring, Port as P};\n"
                  "#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::b::B;\n    fn t() { a::A::new(); }\n}\n",
        "a.rs": "//! a: uses b and net\nuse crate::{b::B, net::ring};\npub struct A(B);\nimpl A { pub fn new() -> Self { ring::go(); A(B) } }\n",
        "b.rs": "//! b names nothing of a in code: // crate::a::A\npub struct B;\n/* crate::a::A */\n"
                "const S: &str = \"crate::a::A\";\nconst R: &str = r#\"super::a\"#;\nfn f<'a>(x: &'a str) -> char { 'a' }\n",
        "net/mod.rs": "//! net\npub mod ring;\npub struct Port;\n",
        "net/ring.rs": "//! ring: takes a type from its parent and from b\nuse super::Port;\nuse crate::b::B;\npub fn go() {}\n"
                       "#[cfg(test)]\nmod tests { use crate::a::A; }\n",
    })
    rc, out = run(root)
    assert rc == 0, out
    assert "no module cycle inside any crate" in out


def test_long_files_are_listed_without_failing(tmp_path):
    root = tree(tmp_path, {"lib.rs": "//! root\n" + "fn f() {}\n" * 20})
    rc, out = run(root, "--max-lines", "10")
    assert rc == 0, out
    assert "crates/a/src/lib.rs: 21 lines" in out
    rc, out = run(root)
    assert rc == 0 and "lines (a file" not in out, out


def test_a_known_cycle_is_listed_and_only_it_passes(tmp_path):
    root = tree(tmp_path, {
        "lib.rs": "//! root\nmod a;\nmod b;\nmod c;\nmod d;\n",
        "a.rs": "//! a\nuse crate::b::B;\npub struct A(B);\n",
        "b.rs": "//! b\npub struct B;\npub fn f() -> Option<crate::a::A> { None }\n",
        "c.rs": "//! c\npub fn fc() { crate::d::fd() }\n",
        "d.rs": "//! d\npub fn fd() { crate::c::fc() }\n",
    })
    known = tmp_path / "known"
    known.write_text("# a and b\ncrates/a/src/a.rs crates/a/src/b.rs\n")
    rc, out = run(root, "--known", str(known))
    assert rc == 1, out                       # c <-> d is not listed
    assert "known cycle (listed, still to take apart): crates/a/src/a.rs crates/a/src/b.rs" in out
    assert "1 module cycle(s)" in out and "crates/a/src/c.rs" in out
    known.write_text("crates/a/src/a.rs crates/a/src/b.rs\ncrates/a/src/c.rs crates/a/src/d.rs\ncrates/a/src/x.rs crates/a/src/y.rs\n")
    rc, out = run(root, "--known", str(known))
    assert rc == 0, out
    assert "besides 2 known one(s)" in out
    assert "listed cycle is gone (remove its line from the known list): crates/a/src/x.rs crates/a/src/y.rs" in out


def test_a_crate_depending_on_a_later_layer_fails(tmp_path):
    """[dependencies] follow the workspace's layers (CRATE_ORDER); a dev-dependency may reach back."""
    for name, deps, dev in (("engine", ["ir"], ["switch"]), ("switch", ["engine"], []), ("ir", [], [])):
        d = tmp_path / "crates" / name
        (d / "src").mkdir(parents=True)
        (d / "src" / "lib.rs").write_text(f"//! {name}\n")
        text = f'[package]\nname = "p4sec-{name}"\n\n[dependencies]\n'
        text += "".join(f'p4sec-{x} = {{ path = "../{x}" }}\n' for x in deps)
        text += "\n[dev-dependencies]\n" + "".join(f'p4sec-{x} = {{ path = "../{x}" }}\n' for x in dev)
        (d / "Cargo.toml").write_text(text)
    rc, out = run(tmp_path)
    assert rc == 0, out
    # the engine comes to depend on the switch, a later layer
    cargo = tmp_path / "crates" / "engine" / "Cargo.toml"
    cargo.write_text(cargo.read_text().replace("[dependencies]\n", '[dependencies]\np4sec-switch = { path = "../switch" }\n'))
    rc, out = run(tmp_path)
    assert rc == 1, out
    assert "crate order: crates/engine depends on crates/switch" in out


def test_same_named_files_in_one_crate_fail(tmp_path):
    """Two files of one name in one crate fail (a grep or an editor tab cannot tell them apart); the names every
    crate shares (mod.rs, tests.rs, ...) and the same name in two crates do not."""
    root = tree(tmp_path, {
        "lib.rs": "//! root\nmod tun;\nmod port;\n",
        "tun.rs": "//! TUN devices\n",
        "port/mod.rs": "//! ports\nmod tun;\nmod tests;\n",
        "port/tun.rs": "//! the TUN port\n",
        "port/tests.rs": "//! tests\n",
        "tests.rs": "//! tests\n",
    })
    (tmp_path / "crates" / "b" / "src").mkdir(parents=True)
    (tmp_path / "crates" / "b" / "Cargo.toml").write_text('[package]\nname = "b"\n')
    (tmp_path / "crates" / "b" / "src" / "lib.rs").write_text("//! b\nmod tuntap;\n")
    (tmp_path / "crates" / "b" / "src" / "tuntap.rs").write_text("//! b's\n")
    rc, out = run(root)
    assert rc == 1, out
    assert "same file name in crates/a: src/port/tun.rs, src/tun.rs" in out, out
    assert "tests.rs" not in out and "mod.rs" not in out and "crates/b" not in out, out
    # an integration test of the same name as a module is one too
    (tmp_path / "crates" / "a" / "src" / "tun.rs").rename(tmp_path / "crates" / "a" / "src" / "tuntap.rs")
    rc, out = run(root)
    assert rc == 0, out
    (tmp_path / "crates" / "a" / "tests").mkdir()
    (tmp_path / "crates" / "a" / "tests" / "tuntap.rs").write_text("//! a test\n")
    rc, out = run(root)
    assert rc == 1 and "same file name in crates/a: src/tuntap.rs, tests/tuntap.rs" in out, out


def test_mirrored_phase_folders_may_share_names(tmp_path):
    """The front end's syntax/ and lower/ hold one file per construct and phase (MIRRORED_PHASES): expr.rs in both
    passes; a types.rs beside syntax/types.rs or a third expr.rs elsewhere in the crate does not."""
    d = tmp_path / "crates" / "frontend"
    files = {"lib.rs": "//! fe\nmod syntax;\nmod lower;\n", "syntax/mod.rs": "//! s\nmod expr;\n",
             "syntax/expr.rs": "//! parsing\n", "lower/mod.rs": "//! l\nmod expr;\n", "lower/expr.rs": "//! lowering\n"}
    for rel, text in files.items():
        (d / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / "src" / rel).write_text(text)
    (d / "Cargo.toml").write_text('[package]\nname = "p4sec-frontend"\n')
    rc, out = run(tmp_path)
    assert rc == 0 and "same file name" not in out, out
    (d / "src" / "types.rs").write_text("//! semantic types\n")
    (d / "src" / "syntax" / "types.rs").write_text("//! parsing types\n")
    rc, out = run(tmp_path)
    assert rc == 1, out
    assert "same file name in crates/frontend: src/syntax/types.rs, src/types.rs" in out, out
    (d / "src" / "types.rs").unlink()
    (d / "src" / "expr.rs").write_text("//! a third\n")
    rc, out = run(tmp_path)
    assert rc == 1, out
    assert "same file name in crates/frontend: src/expr.rs, src/lower/expr.rs, src/syntax/expr.rs" in out, out


def test_the_checkout_has_no_unlisted_same_named_files():
    rc, out = run(SCRIPT.parent.parent, "--known", str(SCRIPT.parent / "layout-known-cycles"))
    assert "same file name in" not in out, out
