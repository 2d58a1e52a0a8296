//! `esp-tool`: ESP encapsulation/decapsulation over stdin/stdout for interoperability tests.
//!
//! Each input line is a JSON request `{"op": "encap"|"decap", "sa": SaConfig, "packets": [hex,
//! ...]}`; the SA lives for the request, so sequence numbers advance across its packets. Each
//! output line is `{"results": [{"ok": hex} | {"error": "IcvMismatch"}, ...]}` (or `{"error":
//! "..."}` for a bad request). `decap` accepts whole IP packets (outer header + ESP).

use p4sec_externs::esp::{esp_of_ip, Sa, SaConfig};
use serde_json::{json, Value};
use std::io::{BufRead, Write};

fn handle(line: &str) -> Value {
    let req: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return json!({"error": format!("bad request: {e}")}),
    };
    let cfg: SaConfig = match serde_json::from_value(req["sa"].clone()) {
        Ok(c) => c,
        Err(e) => return json!({"error": format!("bad SA: {e}")}),
    };
    let sa = match Sa::new(cfg) {
        Ok(s) => s,
        Err(e) => return json!({"error": format!("SA rejected: {e:?}")}),
    };
    let op = req["op"].as_str().unwrap_or("");
    let mut results = vec![];
    let mut out = vec![];
    for p in req["packets"].as_array().cloned().unwrap_or_default() {
        let bytes = match hex::decode(p.as_str().unwrap_or("")) {
            Ok(b) => b,
            Err(_) => {
                results.push(json!({"error": "bad hex"}));
                continue;
            }
        };
        let r = match op {
            "encap" => sa.encapsulate(&bytes, &mut out).map(|_| ()),
            "decap" => esp_of_ip(&bytes)
                .and_then(|esp| sa.decapsulate(esp, &mut out))
                .map(|_| ()),
            _ => return json!({"error": format!("unknown op `{op}`")}),
        };
        results.push(match r {
            Ok(()) => json!({"ok": hex::encode(&out)}),
            Err(e) => json!({"error": format!("{e:?}")}),
        });
    }
    json!({"results": results})
}

fn main() {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let _ = writeln!(stdout, "{}", handle(&line));
        let _ = stdout.flush();
    }
}
