//! The device config of SetForwardingPipelineConfig as clients send it: p4sec's program file
//! (`program.json` from `p4sec compile`), raw or wrapped in `p4.tmp.P4DeviceConfig`, the message
//! BMv2's clients (`simple_switch_grpc` tutorials and loaders) send. The message is declared here
//! from its layout in the P4Runtime project's `p4/tmp/p4config.proto` (three fields), since the
//! `p4runtime` package does not ship it. A BMv2 JSON (`p4c-bm2-ss` output) where the program should
//! be gets an error naming `p4sec compile`.

use p4sec_ir::Program;
use prost::Message;
use std::borrow::Cow;

/// `p4.tmp.P4DeviceConfig`.
#[derive(Clone, PartialEq, Message)]
pub struct P4DeviceConfig {
    #[prost(bool, tag = "1")]
    pub reassign: bool,
    #[prost(message, optional, tag = "2")]
    pub extras: Option<Extras>,
    /// The target's program: for p4sec, its program file.
    #[prost(bytes = "vec", tag = "3")]
    pub device_data: Vec<u8>,
}

/// `p4.tmp.P4DeviceConfig.Extras` (ignored by p4sec).
#[derive(Clone, PartialEq, Message)]
pub struct Extras {
    #[prost(map = "string, string", tag = "1")]
    pub kv: std::collections::HashMap<String, String>,
}

const NOT_A_PROGRAM: &str = "the device config must be a p4sec program (program.json from `p4sec compile`), as it is or as the \
     device_data of a p4.tmp.P4DeviceConfig";

/// The program in a device config: the config itself when it is JSON text (p4sec's program file),
/// else the `device_data` of the `P4DeviceConfig` it encodes.
fn program_bytes(config: &[u8]) -> Result<Cow<'_, [u8]>, String> {
    if config.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        return Ok(Cow::Borrowed(config));
    }
    match P4DeviceConfig::decode(config) {
        Ok(c) if !c.device_data.is_empty() => Ok(Cow::Owned(c.device_data)),
        Ok(_) if !config.is_empty() => {
            Err("the device config is a p4.tmp.P4DeviceConfig with empty device_data: put the program file (program.json from `p4sec compile`) there".into())
        }
        _ => Err(NOT_A_PROGRAM.into()),
    }
}

/// Whether `text` is a BMv2 JSON (the output of `p4c-bm2-ss`: an object with `header_types`,
/// `pipelines`, ...).
fn is_bmv2_json(text: &str) -> bool {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(m)) => {
            m.contains_key("header_types") || m.contains_key("pipelines")
        }
        _ => false,
    }
}

/// The program a device config holds (see the module documentation), or a precise error.
pub fn program(config: &[u8]) -> Result<Program, String> {
    let bytes = program_bytes(config)?;
    let text = std::str::from_utf8(&bytes).map_err(|_| NOT_A_PROGRAM.to_string())?;
    Program::from_json(text).map_err(|e| {
        if is_bmv2_json(text) {
            "the device config holds a BMv2 JSON (p4c-bm2-ss output); p4sec runs its own program file: compile the P4 source with \
             `p4sec compile PROGRAM.p4 -o DIR` and send DIR/program.json (as device_data of the P4DeviceConfig, or as the device config itself)"
                .to_string()
        } else {
            e
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program_json() -> Vec<u8> {
        let src = include_str!("../../../programs/ipv4_router.p4");
        p4sec_frontend::compile_str("ipv4_router.p4", src, &Default::default())
            .unwrap()
            .to_json()
            .into_bytes()
    }

    /// The bytes a BMv2 client sends: reassign = true (field 1), an Extras with one kv pair (field
    /// 2), the program (field 3), written out by hand from the wire format.
    fn wrapped(data: &[u8]) -> Vec<u8> {
        let mut v = vec![0x08, 0x01];
        let kv_entry = [&[0x0a, 0x01, b'k', 0x12, 0x01, b'v'][..]].concat();
        let extras = [&[0x0a, kv_entry.len() as u8][..], &kv_entry].concat();
        v.extend_from_slice(&[0x12, extras.len() as u8]);
        v.extend_from_slice(&extras);
        v.push(0x1a);
        let mut n = data.len();
        while n >= 0x80 {
            v.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        v.push(n as u8);
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn the_program_raw_or_wrapped() {
        let json = program_json();
        let raw = program(&json).unwrap();
        let w = wrapped(&json);
        let c = P4DeviceConfig::decode(&w[..]).unwrap();
        assert!(c.reassign);
        assert_eq!(c.extras.unwrap().kv.get("k").map(String::as_str), Some("v"));
        assert_eq!(
            program(&w).unwrap(),
            raw,
            "the wrapped program is the same program"
        );
    }

    #[test]
    fn bmv2_json_and_other_bytes_get_precise_errors() {
        let bmv2 = br#"{"header_types": [], "headers": [], "parsers": [], "pipelines": [], "program": "basic.p4"}"#;
        for config in [bmv2.to_vec(), wrapped(bmv2)] {
            let e = program(&config).unwrap_err();
            assert!(
                e.contains("BMv2 JSON") && e.contains("`p4sec compile"),
                "{e}"
            );
        }
        assert!(program(b"")
            .unwrap_err()
            .contains("must be a p4sec program"));
        assert!(program(&[0xff, 0xfe, 0x00])
            .unwrap_err()
            .contains("must be a p4sec program"));
        assert!(program(&wrapped(b""))
            .unwrap_err()
            .contains("empty device_data"));
        // a JSON that is neither keeps the program loader's own error
        assert!(!program(b"{\"tables\": 3}").unwrap_err().contains("BMv2"));
    }
}
