//! `p4sec bench-hash` checks, before measuring, that the digest every algorithm computes inside the
//! pipeline (programs/hash_frames.p4, over the whole frame) equals a direct computation; a short
//! run must succeed and write its figures as JSON.

use std::process::Command;

#[test]
fn bench_hash_digests_match_and_json_is_written() {
    let dir = std::env::temp_dir().join(format!("p4sec-bench-hash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("hash.json");
    let out = Command::new(env!("CARGO_BIN_EXE_p4sec"))
        .args(["bench-hash", "--seconds", "0.3", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("Table III")
            && text.contains("NFP-4000")
            && text.contains("p4sec (this machine)"),
        "{text}"
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let ours = j["p4sec_percent_line_rate"].as_array().unwrap();
    assert_eq!(ours.len(), 3);
    for row in ours {
        let pct = row["percent"].as_array().unwrap();
        assert_eq!(pct.len(), 6);
        assert!(pct.iter().all(|p| p.as_f64().unwrap() > 0.0), "{row}");
    }
    assert_eq!(j["per_packet_cost"].as_array().unwrap().len(), 9);
    std::fs::remove_dir_all(&dir).ok();
}
