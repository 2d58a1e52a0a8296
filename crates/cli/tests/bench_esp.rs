//! `p4sec bench-esp`: one ESP tunnel in each direction, every output checked by the benchmark
//! itself; the digest of the emitted frames is the same from run to run, the steady state makes
//! no heap allocation, and bad options are refused.

use std::process::Command;

fn bench_esp(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_p4sec"))
        .arg("bench-esp")
        .args(args)
        .output()
        .expect("p4sec runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The figure after `label` on the line that has it ("digest of the emitted frames 6f21...").
fn after<'a>(text: &'a str, label: &str) -> &'a str {
    let at = text
        .find(label)
        .unwrap_or_else(|| panic!("no `{label}` in {text}"));
    text[at + label.len()..].split_whitespace().next().unwrap()
}

#[test]
fn both_directions_check_their_outputs_and_allocate_nothing_in_the_steady_state() {
    for dir in ["enc", "dec"] {
        let args = ["--dir", dir, "--packets", "700", "--size", "200"];
        let (ok, out, err) = bench_esp(&args);
        assert!(ok, "{dir}: {err}");
        assert!(out.contains("packets 700,"), "{out}");
        // 256 in the first batch, where the buffers grow; none in the 444 after
        assert!(out.contains("in the first 256 packets, 0 after)"), "{out}");
        let digest = after(&out, "digest of the emitted frames ");
        assert_eq!(digest.len(), 16, "{out}");
        // the same frames again: the same digest
        let (ok, again, err) = bench_esp(&args);
        assert!(ok, "{dir}: {err}");
        assert_eq!(after(&again, "digest of the emitted frames "), digest);
    }
    // the two directions emit different frames
    let enc = bench_esp(&["--dir", "enc", "--packets", "10"]).1;
    let dec = bench_esp(&["--dir", "dec", "--packets", "10"]).1;
    assert_ne!(
        after(&enc, "digest of the emitted frames "),
        after(&dec, "digest of the emitted frames ")
    );
}

#[test]
fn bad_options_are_refused() {
    for (args, want) in [
        (&["--dir", "both"][..], "--dir is enc or dec"),
        (&["--size", "39"][..], "--size takes 40 to 1500 bytes"),
        (&["--packets", "0"][..], "--packets at least 1"),
        (
            &["--cipher", "des"][..],
            "--cipher is aes-gcm-128 or null, not `des`",
        ),
    ] {
        let (ok, out, err) = bench_esp(args);
        assert!(!ok, "{args:?} accepted: {out}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn the_null_cipher_runs_the_pipeline_alone() {
    for dir in ["enc", "dec"] {
        let (ok, null, err) = bench_esp(&["--dir", dir, "--packets", "300", "--cipher", "null"]);
        assert!(ok, "{dir}: {err}");
        assert!(null.contains("the NULL cipher"), "{null}");
        let (ok, aes, err) = bench_esp(&["--dir", dir, "--packets", "300"]);
        assert!(ok, "{dir}: {err}");
        assert!(aes.contains("AES-GCM-128"), "{aes}");
        // enc: other bytes on the wire; dec: the same inner packets out of other ESP packets
        let same = after(&null, "digest of the emitted frames ")
            == after(&aes, "digest of the emitted frames ");
        assert_eq!(same, dir == "dec", "{dir}: {null} {aes}");
    }
}
