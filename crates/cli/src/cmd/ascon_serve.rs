//! `p4sec ascon-serve`: ASCON-AEAD for the control plane (the Python package's `p4sec.inband`), one
//! JSON request per input line, one JSON answer per output line, until end of input. The cipher is
//! the same RustCrypto code the extern uses.
//!
//! Request: `{"op": "seal"|"open", "variant": "aead128"|"v12", "key": HEX32, "nonce": HEX32, "ad":
//! HEX, "data": HEX, "tag": HEX32 (open only)}`. Answer: `{"data": HEX, "tag": HEX}` (seal),
//! `{"data": HEX}` (open) or `{"error": "..."}` (a bad request or a tag that does not verify); a
//! bad line never ends the service.

use p4sec_externs::ascon::{self, Variant};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::process::ExitCode;

fn hex_field(v: &Value, name: &str) -> Result<Vec<u8>, String> {
    let s = v
        .get(name)
        .and_then(|x| x.as_str())
        .ok_or_else(|| format!("missing string field `{name}`"))?;
    if s.len() % 2 != 0 {
        return Err(format!("`{name}` has an odd number of hex digits"));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(s.get(i..i + 2).unwrap_or("x"), 16)
                .map_err(|_| format!("`{name}` is not hex"))
        })
        .collect()
}

fn hex16(v: &Value, name: &str) -> Result<[u8; 16], String> {
    let b = hex_field(v, name)?;
    b.as_slice()
        .try_into()
        .map_err(|_| format!("`{name}` must be 16 bytes, not {}", b.len()))
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn answer(line: &str) -> Result<Value, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let variant = match v.get("variant").and_then(|x| x.as_str()) {
        Some("aead128") => Variant::Aead128,
        Some("v12") => Variant::V12,
        other => return Err(format!("unknown variant {other:?} (aead128 or v12)")),
    };
    let key = hex16(&v, "key")?;
    let nonce = hex16(&v, "nonce")?;
    let ad = hex_field(&v, "ad")?;
    let mut data = hex_field(&v, "data")?;
    match v.get("op").and_then(|x| x.as_str()) {
        Some("seal") => {
            let tag = ascon::encrypt(variant, &key, &nonce, &ad, &mut data)
                .map_err(|_| "bad key".to_string())?;
            Ok(json!({"data": to_hex(&data), "tag": to_hex(&tag)}))
        }
        Some("open") => {
            let tag = hex16(&v, "tag")?;
            ascon::decrypt(variant, &key, &nonce, &ad, &mut data, &tag)
                .map_err(|_| "the tag does not verify".to_string())?;
            Ok(json!({"data": to_hex(&data)}))
        }
        other => Err(format!("unknown op {other:?} (seal or open)")),
    }
}

pub fn run() -> ExitCode {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let a = answer(&line).unwrap_or_else(|e| json!({ "error": e }));
        if writeln!(out, "{a}").and_then(|_| out.flush()).is_err() {
            break;
        }
    }
    ExitCode::SUCCESS
}
