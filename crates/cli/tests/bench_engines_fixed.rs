//! `p4sec bench-engines --pipeline NAME --packets N` and `p4sec bench --packets N`: exactly N
//! packets of one pipeline through the engine `--engine` picks, untimed (the runs
//! `python -m bench.instructions` counts instructions in). Both engines emit the same frames;
//! bad values are refused with exit status 2 and a message naming the flag.

use std::process::Command;

fn p4sec(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_p4sec"))
        .args(args)
        .output()
        .expect("p4sec runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The word after `label` ("digest 6f21...").
fn after<'a>(text: &'a str, label: &str) -> &'a str {
    let at = text
        .find(label)
        .unwrap_or_else(|| panic!("no `{label}` in {text}"));
    text[at + label.len()..]
        .split(|c: char| c.is_whitespace() || c == ',')
        .next()
        .unwrap()
}

#[test]
fn each_pipeline_runs_exactly_n_packets_and_the_engines_emit_the_same_frames() {
    for pipeline in ["url-filter", "keyed-bloom", "hash-frames", "esp-enc-null"] {
        let mut digests = vec![];
        for engine in ["closure", "native"] {
            let (code, out, err) = p4sec(&[
                "--engine",
                engine,
                "bench-engines",
                "--pipeline",
                pipeline,
                "--packets",
                "300",
            ]);
            assert_eq!(code, Some(0), "{pipeline} {engine}: {err}");
            assert!(
                out.contains(&format!("{pipeline} on the {engine} engine: packets 300,")),
                "{out}"
            );
            // every frame of these workloads passes: one frame out per packet
            assert_eq!(after(&out, "frames out "), "300", "{out}");
            digests.push(after(&out, "digest ").to_string());
        }
        assert_eq!(digests[0].len(), 16, "{digests:?}");
        assert_eq!(digests[0], digests[1], "{pipeline}: the engines differ");
    }
    // other packets, another digest
    let a = p4sec(&[
        "bench-engines",
        "--pipeline",
        "url-filter",
        "--packets",
        "300",
    ])
    .1;
    let b = p4sec(&[
        "bench-engines",
        "--pipeline",
        "url-filter",
        "--packets",
        "301",
    ])
    .1;
    assert_ne!(after(&a, "digest "), after(&b, "digest "));
}

/// The plain router, the VRF router with its routes in 5 VRFs (a packet's VRF by its port) and the
/// IPv6 router: every packet forwarded as the hand-written router forwards it, the same frames on
/// both engines, other frames for each router (other routes and packets).
#[test]
fn the_router_runs_exactly_n_packets_as_the_hand_written_router_does() {
    let mut by_program = vec![];
    for flags in [&["--vrfs", "0"][..], &["--vrfs", "5"], &["--ipv6"]] {
        let mut digests = vec![];
        for engine in ["closure", "native"] {
            let mut args = vec!["--engine", engine, "bench", "--routes", "500"];
            args.extend(flags);
            args.extend(["--packets", "200"]);
            let (code, out, err) = p4sec(&args);
            assert_eq!(code, Some(0), "{engine}: {err}");
            assert!(
                out.contains(&format!("on the {engine} engine: packets 200,")),
                "{out}"
            );
            let program = match flags.last().copied().unwrap_or_default() {
                "0" => "IPv4 LPM router (programs/ipv4_router.p4), 500 routes,",
                "5" => "IPv4 LPM router (programs/ipv4_vrf_router.p4), 500 routes in 5 VRFs,",
                _ => "IPv6 LPM router (programs/ipv6_router.p4), 500 routes,",
            };
            assert!(out.contains(program), "{out}");
            assert_eq!(after(&out, "forwarded "), "200", "{out}");
            assert!(
                out.contains("agree with the hand-written router 200/200"),
                "{out}"
            );
            digests.push(after(&out, "digest ").to_string());
        }
        assert_eq!(digests[0], digests[1]);
        by_program.push(digests.remove(0));
    }
    assert_ne!(by_program[0], by_program[1]);
    assert_ne!(by_program[0], by_program[2]);
    assert_ne!(by_program[1], by_program[2]);
}

#[test]
fn bad_values_are_refused_with_status_2() {
    for (args, want) in [
        (
            &["bench-engines", "--pipeline", "router", "--packets", "3"][..],
            "invalid value 'router' for '--pipeline <NAME>'",
        ),
        (
            &[
                "bench-engines",
                "--pipeline",
                "url-filter",
                "--packets",
                "0",
            ][..],
            "invalid value '0' for '--packets <N>'",
        ),
        (
            &[
                "bench-engines",
                "--pipeline",
                "url-filter",
                "--packets",
                "ten",
            ][..],
            "invalid value 'ten' for '--packets <N>'",
        ),
        (
            &["bench-engines", "--packets", "3"][..],
            "the following required arguments were not provided:\n  --pipeline <NAME>",
        ),
        (
            &[
                "bench-engines",
                "--pipeline",
                "keyed-bloom",
                "--packets",
                "3",
                "--json",
                "x",
            ][..],
            "the argument '--packets <N>' cannot be used with '--json <JSON>'",
        ),
        (
            &["bench", "--packets", "-1"][..],
            "unexpected argument '-1'",
        ),
        (
            &["bench", "--packets", "0"][..],
            "invalid value '0' for '--packets <N>'",
        ),
        (
            &["bench", "--routes", "0", "--packets", "3"][..],
            "invalid value '0' for '--routes <ROUTES>'",
        ),
        (
            &["bench", "--vrfs", "511", "--packets", "3"][..],
            "invalid value '511' for '--vrfs <N>'",
        ),
        (
            &["bench", "--vrfs", "2", "--ipv6", "--packets", "3"][..],
            "the argument '--vrfs <N>' cannot be used with '--ipv6'",
        ),
        (
            &["bench", "--packets", "3", "--seconds", "1"][..],
            "the argument '--packets <N>' cannot be used with '--seconds <SECONDS>'",
        ),
    ] {
        let (code, out, err) = p4sec(args);
        assert_eq!(code, Some(2), "{args:?} gave {code:?}: {out} {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
