//! Runs the STF suites through the `p4sec` binary: our own tests (all must pass) and the reference
//! compiler's corpus in ../shared/conformance/p4c-stf (at least 90% must pass).

use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

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
    let dir = std::env::var("P4SEC_CONFORMANCE").map(PathBuf::from).unwrap_or_else(|_| root().join("../shared/conformance/p4c-stf"));
    if !dir.exists() {
        panic!("conformance corpus not found at {} (set P4SEC_CONFORMANCE)", dir.display());
    }
    let (pass, fail, text) = suite(&dir);
    let total = pass + fail;
    assert!(total >= 100, "expected the full corpus, ran {total}:\n{text}");
    assert!(pass * 10 >= total * 9, "only {pass}/{total} passed:\n{text}");
}

#[test]
fn every_corpus_program_compiles_or_fails_cleanly() {
    let dir = root().join("../shared/conformance/p4c-stf");
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
