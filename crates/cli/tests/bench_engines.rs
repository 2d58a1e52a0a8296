//! `p4sec bench-engines` and `p4sec bench` compare the two engines: before timing they check that
//! both emit the same frames (bench-engines) and forward every packet as the hand-written router
//! does (bench); a short run must succeed, print every pipeline and write its figures as JSON.

use std::process::Command;

fn run(args: &[&str], json: &std::path::Path) -> (String, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_p4sec"))
        .args(args)
        .arg("--json")
        .arg(json)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    (text, j)
}

#[test]
fn both_engines_are_measured_on_the_same_outputs() {
    let dir = std::env::temp_dir().join(format!("p4sec-bench-engines-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (text, j) = run(&["bench-engines", "--seconds", "0.1"], &dir.join("e.json"));
    let rows = j["pipelines"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["pipeline"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "esp-enc-null",
            "esp-dec-null",
            "esp-enc-aes-gcm",
            "esp-dec-aes-gcm",
            "url-filter",
            "keyed-bloom",
            "hash-frames"
        ]
    );
    for r in rows {
        for k in ["closure_ns_per_packet", "native_ns_per_packet", "speedup"] {
            assert!(r[k].as_f64().unwrap() > 0.0, "{r}");
        }
        assert!(r["closure_packets"].as_u64().unwrap() > 0, "{r}");
        assert!(r["native_packets"].as_u64().unwrap() > 0, "{r}");
        assert!(text.contains(r["pipeline"].as_str().unwrap()), "{text}");
    }
    let (text, j) = run(
        &["bench", "--routes", "2000", "--seconds", "0.3"],
        &dir.join("r.json"),
    );
    assert!(text.contains("native engine / hand-written"), "{text}");
    assert_eq!(j["agree"], j["packets_checked"], "{j}");
    for k in ["closure_pps", "jit_pps", "native_pps", "engine_pps"] {
        assert!(j[k].as_f64().unwrap() > 0.0, "{j}");
    }
    assert_eq!(j["jit_allocs_per_packet"].as_f64(), Some(0.0), "{j}");
    assert_eq!(j["vrfs"], 0, "{j}");
    // the VRF router: its routes in 3 VRFs
    let (text, j) = run(
        &[
            "bench",
            "--routes",
            "900",
            "--vrfs",
            "3",
            "--seconds",
            "0.3",
        ],
        &dir.join("v.json"),
    );
    assert!(text.contains("900 routes in 3 VRFs"), "{text}");
    assert_eq!(j["benchmark"], "ipv4_vrf_router_64B", "{j}");
    assert_eq!(
        (j["vrfs"].as_u64(), j["routes"].as_u64()),
        (Some(3), Some(900)),
        "{j}"
    );
    assert_eq!(j["agree"], j["packets_checked"], "{j}");
    assert_eq!(j["jit_allocs_per_packet"].as_f64(), Some(0.0), "{j}");
    // the IPv6 router
    let (text, j) = run(
        &["bench", "--routes", "700", "--ipv6", "--seconds", "0.3"],
        &dir.join("6.json"),
    );
    assert!(
        text.contains("IPv6 LPM router (programs/ipv6_router.p4), 700 routes"),
        "{text}"
    );
    assert_eq!(j["benchmark"], "ipv6_router_64B", "{j}");
    assert_eq!(
        (j["vrfs"].as_u64(), j["routes"].as_u64()),
        (Some(0), Some(700)),
        "{j}"
    );
    assert_eq!(j["agree"], j["packets_checked"], "{j}");
    assert_eq!(j["jit_allocs_per_packet"].as_f64(), Some(0.0), "{j}");
    std::fs::remove_dir_all(&dir).ok();
}
