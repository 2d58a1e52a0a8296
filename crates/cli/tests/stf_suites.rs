//! Runs the STF suites through the `p4sec` binary: our own tests (all must pass) and the reference
//! compiler's corpus, `conformance/p4c-stf` in the shared corpora (at least 90% must pass; skipped without the
//! corpora, a failure under `CI=true`: see common/mod.rs, and `skip_logic_both_ways` below).

mod common;

use common::root;
use std::path::{Path, PathBuf};
use std::process::Command;

fn suite(dir: &PathBuf) -> (u32, u32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_p4sec")).arg("stf").arg("--suite").arg(dir).output().expect("run p4sec");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let last = text.lines().last().unwrap_or("").to_string();
    let nums: Vec<u32> = last.split(|c: char| !c.is_ascii_digit()).filter_map(|x| x.parse().ok()).collect();
    assert_eq!(nums.len(), 2, "closing line `N passed, M failed` missing:\n{text}");
    assert!(last.ends_with("failed") && last.contains(" passed, "), "bad closing line: {last}");
    (nums[0], nums[1], text)
}

#[test]
fn own_stf_tests_all_pass() {
    let (pass, fail, text) = suite(&root().join("tests/stf"));
    assert!(pass >= 4, "{text}");
    assert_eq!(fail, 0, "{text}");
}

#[test]
fn reference_corpus_at_least_90_percent() {
    let Some(dir) = common::shared("conformance/p4c-stf") else { return };
    let (pass, fail, text) = suite(&dir);
    let total = pass + fail;
    assert!(total >= 100, "expected the full corpus, ran {total}:\n{text}");
    assert!(pass * 10 >= total * 9, "only {pass}/{total} passed:\n{text}");
}

#[test]
fn every_corpus_program_compiles_or_fails_cleanly() {
    let Some(dir) = common::shared("conformance/p4c-stf") else { return };
    let out_dir = std::env::temp_dir().join(format!("p4sec-compile-{}", std::process::id()));
    for e in std::fs::read_dir(&dir).expect("corpus") {
        let p = e.unwrap().path();
        if p.extension().map(|x| x == "p4").unwrap_or(false) {
            let o = Command::new(env!("CARGO_BIN_EXE_p4sec")).arg("compile").arg(&p).arg("-o").arg(&out_dir).output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!err.contains("panicked"), "{}: {err}", p.display());
            if !o.status.success() {
                assert!(err.contains("error:"), "{}: failure without a located error: {err}", p.display());
            }
        }
    }
    let _ = std::fs::remove_dir_all(out_dir);
}

/// The corpus as the tests above find it: its number of programs (`skip_logic_both_ways` runs this test with
/// P4SEC_SHARED and CI set each way).
#[test]
fn conformance_corpus_is_readable() {
    let Some(dir) = common::shared("conformance/p4c-stf") else { return };
    let n = std::fs::read_dir(&dir).expect("read the corpus").filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "p4"))).count();
    assert!(n > 0, "no .p4 programs in {}", dir.display());
    println!("corpus at {}: {n} programs", dir.display());
}

/// The skip logic both ways, on this test binary itself: the corpus absent -> the test passes with one skip line
/// naming the path and the variable; absent under CI=true -> the test fails; present -> the test runs.
#[test]
fn skip_logic_both_ways() {
    let tmp = std::env::temp_dir().join(format!("p4sec-shared-{}", std::process::id()));
    let run = |shared: &Path, ci: Option<&str>| {
        let mut c = Command::new(std::env::current_exe().unwrap());
        c.args(["--exact", "conformance_corpus_is_readable", "--nocapture"]).env("P4SEC_SHARED", shared).env_remove("CI");
        if let Some(ci) = ci {
            c.env("CI", ci);
        }
        let o = c.output().unwrap();
        (o.status.success(), String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr))
    };
    let absent = tmp.join("nowhere");
    let want = format!("skipped conformance_corpus_is_readable: shared corpus not found at {} (set P4SEC_SHARED", absent.join("conformance/p4c-stf").display());
    let (ok, out) = run(&absent, None);
    assert!(ok, "absent corpus must skip, not fail:\n{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with(&want)).count(), 1, "one skip line `{want}...` expected:\n{out}");
    assert!(!out.contains("corpus at "), "{out}");

    let (ok, out) = run(&absent, Some("true"));
    assert!(!ok, "absent corpus under CI=true must fail:\n{out}");
    assert!(out.contains("CI=true: a missing corpus is a failure"), "{out}");

    let present = tmp.join("shared");
    std::fs::create_dir_all(present.join("conformance/p4c-stf")).unwrap();
    std::fs::write(present.join("conformance/p4c-stf/a.p4"), "").unwrap();
    let (ok, out) = run(&present, Some("true"));
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(ok, "{out}");
    assert!(out.contains(&format!("corpus at {}: 1 programs", present.join("conformance/p4c-stf").display())), "{out}");
    assert!(!out.contains("skipped"), "{out}");
}

/// A complete v1model program whose ingress body is `body`.
fn program(body: &str) -> String {
    format!(
        "#include <v1model.p4>\nheader h_t {{ bit<8> a; }}\nstruct hs {{ h_t h; }}\nstruct m {{ }}\n\
         parser P(packet_in p, out hs hdr, inout m meta, inout standard_metadata_t sm) {{ state start {{ p.extract(hdr.h); transition accept; }} }}\n\
         control C(inout hs hdr, inout m meta) {{ apply {{ }} }}\n\
         control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{ apply {{\n{body}\n}} }}\n\
         control E(inout hs hdr, inout m meta, inout standard_metadata_t sm) {{ apply {{ }} }}\n\
         control D(packet_out p, in hs hdr) {{ apply {{ p.emit(hdr.h); }} }}\n\
         V1Switch(P(), C(), I(), E(), C(), D()) main;\n"
    )
}

#[test]
fn compile_errors_name_file_line_and_column() {
    let dir = std::env::temp_dir().join(format!("p4sec-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases: [(&str, &str, &str); 7] = [
        ("syntax.p4", "#include <v1model.p4>\nheader h_t { bit<8> a }\n", "syntax.p4:2:"),
        ("undeclared.p4", &program("hdr.h.a = y;"), "`y` is not declared"),
        ("types.p4", &program("bit<4> z = hdr.h.a;"), "type mismatch"),
        ("width.p4", &program("hdr.h.a = hdr.h.a + 16w1;"), "different types"),
        ("table.p4", &program("nosuch.apply();"), "`nosuch` is not declared"),
        ("include.p4", "#include \"nope.p4\"\n", "cannot find include file"),
        ("nomain.p4", "#include <v1model.p4>\n", "no `main`"),
    ];
    for (name, src, want) in cases {
        let p = dir.join(name);
        std::fs::write(&p, src).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_p4sec")).arg("compile").arg(&p).arg("-o").arg(dir.join("out")).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{name} should fail");
        assert!(err.contains(want), "{name}: expected `{want}` in:\n{err}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn compile_says_what_it_wrote_and_a_missing_input_in_one_line() {
    let dir = std::env::temp_dir().join(format!("p4sec-compile-out-{}", std::process::id()));
    let o = Command::new(env!("CARGO_BIN_EXE_p4sec")).arg("compile").arg(root().join("programs/ipv4_router.p4")).arg("-o").arg(&dir).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    for f in ["program.json", "p4info.txtpb", "p4info.binpb"] {
        assert!(out.lines().any(|l| l == format!("wrote {}", dir.join(f).display())), "no `wrote ...{f}` line:\n{out}");
        assert!(dir.join(f).exists());
    }
    let missing = dir.join("nosuch.p4");
    let o = Command::new(env!("CARGO_BIN_EXE_p4sec")).arg("compile").arg(&missing).arg("-o").arg(&dir).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "one line expected:\n{err}");
    assert!(err.starts_with(&format!("{}: error: cannot read file: ", missing.display())), "{err}");
}
