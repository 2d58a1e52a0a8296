//! Protobuf messages in the text format (`field: value`, `field { ... }`, as protobuf's own
//! `TextFormat` prints them and p4c writes `.p4info.txtpb`), driven by the descriptors the messages
//! were generated from. With the JSON writer (`json.rs`), it makes the one P4Info message
//! (`p4info.rs`) into each file format `p4sec compile` writes.

use crate::descriptors::{fields, scalar, unpack, Scalar, Schema, Wire};
use prost_types::field_descriptor_proto::{Label, Type};
use std::fmt::Write;

/// The message `bytes` (protobuf binary) of type `full_name` (e.g. `p4.config.v1.P4Info`) in the
/// text format.
pub fn to_text(full_name: &str, bytes: &[u8]) -> Result<String, String> {
    let schema = Schema::load()?;
    let mut out = String::new();
    message(&schema, full_name, bytes, &mut out, 0)?;
    Ok(out)
}

/// A string or bytes value quoted as the text format writes it: printable ASCII as it is (but for
/// `"`, `'` and `\`), everything else as a three-digit octal escape.
fn quote(b: &[u8], out: &mut String) {
    out.push('"');
    for &c in b {
        match c {
            b'"' => out.push_str("\\\""),
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x20..=0x7e => out.push(c as char),
            _ => {
                let _ = write!(out, "\\{c:03o}");
            }
        }
    }
    out.push('"');
}

/// One field's value after `name` (a scalar after `: `, a message as a block).
fn value(
    schema: &Schema,
    f: &prost_types::FieldDescriptorProto,
    v: &Wire,
    out: &mut String,
    depth: usize,
) -> Result<(), String> {
    match scalar(schema, f, v)? {
        Scalar::Message(name, b) => {
            out.push_str(" {\n");
            message(schema, name, b, out, depth + 1)?;
            out.push_str(&"  ".repeat(depth));
            out.push('}');
        }
        Scalar::Str(s) => {
            out.push_str(": ");
            quote(s.as_bytes(), out);
        }
        Scalar::Bytes(b) => {
            out.push_str(": ");
            quote(b, out);
        }
        Scalar::Bool(x) => out.push_str(if x { ": true" } else { ": false" }),
        Scalar::Int(x) | Scalar::Int64(x) => {
            let _ = write!(out, ": {x}");
        }
        Scalar::Uint64(x) => {
            let _ = write!(out, ": {x}");
        }
        Scalar::Float(x) => {
            let _ = write!(out, ": {x}");
        }
        Scalar::Float32(x) => {
            let _ = write!(out, ": {x}");
        }
        Scalar::Enum(Some(name), _) => {
            let _ = write!(out, ": {name}");
        }
        Scalar::Enum(None, x) => {
            let _ = write!(out, ": {x}");
        }
    }
    Ok(())
}

/// The fields of message `name` in `b`, each on lines of its own at `depth`, in the order they
/// appear (a serialized message has them in field-number order, as the text format lists them).
fn message(
    schema: &Schema,
    name: &str,
    b: &[u8],
    out: &mut String,
    depth: usize,
) -> Result<(), String> {
    let desc = schema
        .messages
        .get(name)
        .ok_or_else(|| format!("message type {name} not in the descriptors"))?;
    let mut vals: Vec<(&prost_types::FieldDescriptorProto, Wire)> = vec![];
    for (num, v) in fields(b)? {
        let Some(f) = desc.field.iter().find(|f| f.number() == num as i32) else {
            continue; // unknown fields are left out
        };
        match v {
            Wire::Bytes(p)
                if f.label() == Label::Repeated
                    && !matches!(f.r#type(), Type::Message | Type::String | Type::Bytes) =>
            {
                vals.extend(unpack(f.r#type(), p)?.into_iter().map(|w| (f, w)))
            }
            v if f.label() != Label::Repeated => {
                // a singular field seen twice: the last value wins (a message's are merged by
                // protobuf; the encoder here never writes one twice)
                vals.retain(|(g, _)| g.number() != f.number());
                vals.push((f, v));
            }
            v => vals.push((f, v)),
        }
    }
    // fields in number order; a map's entries by key, as protobuf's text format prints a map
    vals.sort_by(|(f, a), (g, b)| {
        f.number()
            .cmp(&g.number())
            .then_with(|| match is_map(schema, f) {
                true => map_key(a).cmp(&map_key(b)),
                false => std::cmp::Ordering::Equal,
            })
    });
    for (f, v) in &vals {
        out.push_str(&"  ".repeat(depth));
        out.push_str(f.name());
        value(schema, f, v, out, depth)?;
        out.push('\n');
    }
    Ok(())
}

/// Whether field `f` is a map (its entries are messages marked `map_entry`).
fn is_map(schema: &Schema, f: &prost_types::FieldDescriptorProto) -> bool {
    f.r#type() == Type::Message
        && schema
            .messages
            .get(f.type_name().trim_start_matches('.'))
            .and_then(|m| m.options.as_ref())
            .is_some_and(|o| o.map_entry())
}

/// A map entry's key (field 1) as it is on the wire: strings compare by their bytes, integer keys
/// by value (a varint's value, not its bytes).
fn map_key(v: &Wire) -> (u64, Vec<u8>) {
    let Wire::Bytes(b) = v else {
        return (0, vec![]);
    };
    match fields(b)
        .ok()
        .and_then(|fs| fs.into_iter().find(|(n, _)| *n == 1))
    {
        Some((_, Wire::Bytes(k))) => (0, k.to_vec()),
        Some((_, Wire::Varint(x) | Wire::Fixed64(x))) => (x, vec![]),
        Some((_, Wire::Fixed32(x))) => (u64::from(x), vec![]),
        None => (0, vec![]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::p4::config::v1 as cfg;
    use prost::Message;

    #[test]
    fn scalars_messages_repeated_and_escapes() {
        let info = cfg::P4Info {
            pkg_info: Some(cfg::PkgInfo {
                arch: "v1model".into(),
                annotations: vec!["@a(\"x\")".into(), "tab\there".into()],
                ..Default::default()
            }),
            tables: vec![cfg::Table {
                preamble: Some(cfg::Preamble {
                    id: 33554433,
                    name: "ingress.t".into(),
                    alias: "t".into(),
                    ..Default::default()
                }),
                size: 1024,
                ..Default::default()
            }],
            ..Default::default()
        };
        let text = to_text("p4.config.v1.P4Info", &info.encode_to_vec()).unwrap();
        assert_eq!(
            text,
            "pkg_info {\n  annotations: \"@a(\\\"x\\\")\"\n  annotations: \"tab\\there\"\n  \
             arch: \"v1model\"\n}\ntables {\n  preamble {\n    id: 33554433\n    \
             name: \"ingress.t\"\n    alias: \"t\"\n  }\n  size: 1024\n}\n"
        );
    }

    #[test]
    fn bytes_are_octal_escaped_and_enums_named() {
        let m = cfg::MatchField {
            id: 1,
            name: "k".into(),
            bitwidth: 9,
            r#match: Some(cfg::match_field::Match::MatchType(
                cfg::match_field::MatchType::Lpm as i32,
            )),
            ..Default::default()
        };
        let text = to_text("p4.config.v1.MatchField", &m.encode_to_vec()).unwrap();
        assert_eq!(text, "id: 1\nname: \"k\"\nbitwidth: 9\nmatch_type: LPM\n");
        let mut out = String::new();
        quote(&[0, b'a', 0xff], &mut out);
        assert_eq!(out, "\"\\000a\\377\"");
    }

    #[test]
    fn malformed_bytes_are_an_error() {
        assert!(to_text("p4.config.v1.P4Info", &[0x0a, 0x05, 0x01]).is_err());
        assert!(to_text("no.such.Message", &[]).is_err());
    }
}
