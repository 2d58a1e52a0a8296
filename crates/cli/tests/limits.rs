//! Compiler and loader limits (issue 23): no depth or size the input controls goes unbounded.
//! Operator chains compile (long chains of an associative operator regrouped by the parser) and
//! their program files load in the switch; chains the parser cannot regroup get a located "nested
//! too deep" error past the front end's limit instead of a stack overflow; the
//! preprocessor refuses non-regular and oversized files and stops runaway macro expansion. The deep
//! and runaway cases run through the `p4sec` binary (with a time limit), so that a regression fails
//! the test instead of crashing or exhausting the test process.

use p4sec_engine::{Engine, Outputs, Worker};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_p4sec");

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("p4sec-limits-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A v1model program whose ingress computes a chain of `n` terms joined by `op` on line 12: `+` or
/// `|+|` sums the frame's first byte `n` times (`|+|` saturating), `&&` tests it for 1 `n` times;
/// the result goes out on port 1.
fn chain_program(n: usize, op: &str) -> String {
    let stmt = if op != "&&" {
        format!("meta.b = {};", vec!["meta.a"; n].join(&format!(" {op} ")))
    } else {
        format!(
            "if ({}) {{ meta.b = 1; }}",
            vec!["meta.a == 1"; n].join(" && ")
        )
    };
    format!(
        "#include <core.p4>\n#include <v1model.p4>\nheader h_t {{ bit<8> x; }}\nstruct headers_t {{ h_t h; }}\n\
         struct metadata_t {{ bit<8> a; bit<8> b; }}\n\
         parser P(packet_in pkt, out headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {{\n\
         state start {{ pkt.extract(hdr.h); transition accept; }}\n}}\n\
         control VC(inout headers_t hdr, inout metadata_t meta) {{ apply {{ }} }}\n\
         control I(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {{\n\
         apply {{ meta.a = hdr.h.x;\n{stmt}\nhdr.h.x = meta.b; sm.egress_spec = 1; }}\n}}\n\
         control E(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {{ apply {{ }} }}\n\
         control CC(inout headers_t hdr, inout metadata_t meta) {{ apply {{ }} }}\n\
         control D(packet_out pkt, in headers_t hdr) {{ apply {{ pkt.emit(hdr.h); }} }}\n\
         V1Switch(P(), VC(), I(), E(), CC(), D()) main;\n"
    )
}

/// Run the binary with a time limit: (exit code, or None if killed by a signal; stderr).
fn p4sec(args: &[&str], limit: Duration) -> (Option<i32>, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("p4sec runs");
    // stderr read while it runs (a long error message would fill the pipe and block it)
    let mut pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(&mut pipe, &mut err);
        err
    });
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status.code(), reader.join().unwrap());
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("p4sec {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn compile(dir: &Path, src: &str) -> (Option<i32>, String) {
    std::fs::write(dir.join("c.p4"), src).unwrap();
    p4sec(
        &[
            "compile",
            dir.join("c.p4").to_str().unwrap(),
            "--out",
            dir.join("out").to_str().unwrap(),
        ],
        Duration::from_secs(120),
    )
}

/// Chains of an operator the parser cannot regroup (`|+|` is not associative) deepen the tree by
/// one per operator: past the limit, a located error.
#[test]
fn chains_past_the_limit_get_a_located_error_instead_of_a_crash() {
    for op in ["|+|"] {
        for n in [300, 3000, 100_000] {
            let d = tmp(&format!("deep{}{n}", op.len()));
            let (code, err) = compile(&d, &chain_program(n, op));
            assert_eq!(
                code,
                Some(1),
                "{n} `{op}` terms: exit {code:?} (a signal if None): {err}"
            );
            assert!(
                err.contains("nested more than 256 levels deep"),
                "{n} `{op}` terms: {err}"
            );
            assert!(
                err.contains("c.p4:12:"),
                "{n} `{op}` terms: located on the chain's line: {err}"
            );
        }
    }
    // deep parentheses and deeply nested mixed forms: the parser's own limit, located too
    let d = tmp("parens");
    let expr = format!("{}meta.a{}", "(".repeat(5000), ")".repeat(5000));
    let (code, err) = compile(
        &d,
        &chain_program(1, "+").replace("meta.b = meta.a;", &format!("meta.b = {expr};")),
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("c.p4:12:"), "{err}");
}

/// 1 + the write of the 60-term chain (which the switch used to refuse: serde_json's recursion
/// limit), of chains the parser regroups into balanced trees (`+` and `&&` of up to 100,000
/// terms; p4c compiles them) and of a `|+|` chain just below the limit: compiled by the binary,
/// loaded by the switch from the program file, and run.
#[test]
fn chains_compile_and_their_program_files_load() {
    for (n, op, input, want) in [
        (60usize, "+", 3u8, 3 * 60_u8),
        (250, "+", 3, (3 * 250 % 256) as u8),
        (500, "+", 3, (3 * 500 % 256) as u8),
        (100_000, "+", 3, (3 * 100_000 % 256) as u8),
        (60, "&&", 1, 1),
        (250, "&&", 1, 1),
        (3000, "&&", 1, 1),
        (250, "|+|", 3, 255),
    ] {
        let d = tmp(&format!("ok{}{n}", op.len()));
        let (code, err) = compile(&d, &chain_program(n, op));
        assert_eq!(code, Some(0), "{n} `{op}` terms: {err}");
        let json = std::fs::read_to_string(d.join("out/program.json")).unwrap();
        // the switch binary loads it and forwards a frame (pcap ports: it exits once the input is
        // done)
        let pcap_in = d.join("in.pcap");
        let mut pcap = vec![];
        pcap.extend_from_slice(&[
            0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0,
            0,
        ]);
        pcap.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, input]);
        std::fs::write(&pcap_in, pcap).unwrap();
        let out1 = d.join("out1.pcap");
        let (code, err) = p4sec(
            &[
                "switch",
                "--program",
                d.join("out").to_str().unwrap(),
                "--port",
                &format!("0=pcap:in={}", pcap_in.display()),
                "--port",
                &format!("1=pcap:out={}", out1.display()),
            ],
            Duration::from_secs(60),
        );
        assert_eq!(
            code,
            Some(0),
            "{n} `{op}` terms: the switch refused the program file: {err}"
        );
        let got = std::fs::read(&out1).unwrap_or_default();
        assert_eq!(
            got.last(),
            Some(&want),
            "{n} `{op}` terms: the frame out of port 1 ({} bytes of pcap)",
            got.len()
        );
        // in process, on a thread with an ordinary 2 MB stack: the loader and the engine
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let prog = p4sec_ir::Program::from_json(&json).expect("loads");
                let e = Engine::new(Arc::new(prog), &[]).expect("engine");
                let mut w = Worker::new(&e);
                let mut out = Outputs::default();
                e.process(&mut w, 0, &[input], &mut out);
                tx.send(out.iter().map(|(p, b)| (p, b.to_vec())).collect::<Vec<_>>())
                    .unwrap();
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(
            rx.recv().unwrap(),
            vec![(1, vec![want])],
            "{n} `{op}` terms in process"
        );
    }
}

#[test]
fn program_files_nested_past_the_loader_limit_are_refused_precisely() {
    let deep = "[".repeat(1_000_000);
    let e = p4sec_ir::Program::from_json(&deep).unwrap_err();
    assert!(
        e.contains("nested more than") && e.contains("at byte"),
        "{e}"
    );
    // brackets inside strings do not count
    let quoted = format!("\"{}\"", "[".repeat(100_000));
    let e = p4sec_ir::Program::from_json(&quoted).unwrap_err();
    assert!(!e.contains("nested more than"), "{e}");
}

#[test]
fn the_preprocessor_refuses_devices_large_files_and_runaway_expansion() {
    let d = tmp("pp");
    // a device: refused at once, located on the #include
    let (code, err) = compile(&d, "#include <core.p4>\n#include \"/dev/zero\"\n");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("not a regular file") && err.contains("c.p4:2:"),
        "{err}"
    );
    // a directory
    let (code, err) = compile(&d, &format!("#include \"{}\"\n", d.display()));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("not a regular file"), "{err}");
    // a file over the size limit (16 MiB)
    let big = d.join("big.p4");
    std::fs::write(&big, vec![b' '; (16 << 20) + 1]).unwrap();
    let (code, err) = compile(&d, "#include \"big.p4\"\n");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("larger than the limit") && err.contains("c.p4:1:"),
        "{err}"
    );
    let (code, err) = p4sec(
        &[
            "compile",
            big.to_str().unwrap(),
            "--out",
            d.join("o").to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("larger than the limit"), "{err}");
    // an exponential #define chain: each level doubles the text
    let mut src = String::from("#define A0 xxxxxxxx xxxxxxxx\n");
    for i in 1..=40 {
        src.push_str(&format!("#define A{i} A{} A{}\n", i - 1, i - 1));
    }
    src.push_str("A40\n");
    let (code, err) = compile(&d, &src);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("grows past the limit") && err.contains("c.p4:42:"),
        "{err}"
    );
}
