//! Protobuf messages in the proto3 JSON mapping, driven by the descriptors the messages were
//! generated from (`build.rs` keeps them): field names in lowerCamelCase, 64-bit integers as
//! strings, bytes in base64, enums by name, maps as objects, default values left out. Used for
//! `p4sec compile --p4runtime-files NAME.json` (the P4Info as the reference compiler writes it in
//! JSON).

use crate::descriptors::{self, fields, unpack, Scalar, Schema, Wire};
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::DescriptorProto;
use std::collections::HashMap;
use std::fmt::Write;

/// The message `bytes` (protobuf binary) of type `full_name` (e.g. `p4.config.v1.P4Info`) as JSON.
pub fn to_json(full_name: &str, bytes: &[u8]) -> Result<String, String> {
    let schema = Schema::load()?;
    let mut out = String::new();
    message(&schema, full_name, bytes, &mut out, 0)?;
    out.push('\n');
    Ok(out)
}

/// `snake_case` -> `lowerCamelCase`, as protoc derives a field's JSON name.
fn json_name(f: &prost_types::FieldDescriptorProto) -> String {
    if let Some(n) = f.json_name.as_deref().filter(|n| !n.is_empty()) {
        return n.to_string();
    }
    let mut out = String::new();
    let mut up = false;
    for c in f.name().chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn quote(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= c.len() {
                out.push(A[((n >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn indent(out: &mut String, depth: usize) {
    out.push('\n');
    out.push_str(&"  ".repeat(depth));
}

/// A scalar of type `ty` (one value; packed repeated values are split by the caller).
fn scalar(
    schema: &Schema,
    f: &prost_types::FieldDescriptorProto,
    v: &Wire,
    out: &mut String,
    depth: usize,
) -> Result<(), String> {
    match descriptors::scalar(schema, f, v)? {
        Scalar::Message(name, b) => message(schema, name, b, out, depth)?,
        Scalar::Str(s) => quote(s, out),
        Scalar::Bytes(b) => quote(&base64(b), out),
        Scalar::Bool(x) => out.push_str(if x { "true" } else { "false" }),
        Scalar::Int(x) => {
            let _ = write!(out, "{x}");
        }
        // the proto3 JSON mapping writes 64-bit integers as strings
        Scalar::Int64(x) => {
            let _ = write!(out, "\"{x}\"");
        }
        Scalar::Uint64(x) => {
            let _ = write!(out, "\"{x}\"");
        }
        Scalar::Float(x) => {
            let _ = write!(out, "{x}");
        }
        Scalar::Float32(x) => {
            let _ = write!(out, "{x}");
        }
        Scalar::Enum(Some(name), _) => quote(name, out),
        Scalar::Enum(None, x) => {
            let _ = write!(out, "{x}");
        }
    }
    Ok(())
}

fn message(
    schema: &Schema,
    name: &str,
    b: &[u8],
    out: &mut String,
    depth: usize,
) -> Result<(), String> {
    if name == "google.protobuf.Any" {
        return any(schema, b, out, depth);
    }
    let desc = schema
        .messages
        .get(name)
        .ok_or_else(|| format!("message type {name} not in the descriptors"))?;
    // the fields in the order of their first appearance, each with all its values
    let mut order: Vec<u32> = vec![];
    let mut values: HashMap<u32, Vec<Wire>> = HashMap::new();
    for (num, v) in fields(b)? {
        let f = desc.field.iter().find(|f| f.number() == num as i32);
        let e = values.entry(num).or_default();
        if e.is_empty() {
            order.push(num);
        }
        match (f, v) {
            (Some(f), Wire::Bytes(p))
                if f.label() == Label::Repeated
                    && !matches!(f.r#type(), Type::Message | Type::String | Type::Bytes) =>
            {
                e.extend(unpack(f.r#type(), p)?)
            }
            (_, v) => e.push(v),
        }
    }
    out.push('{');
    let mut first = true;
    for num in order {
        let Some(f) = desc.field.iter().find(|f| f.number() == num as i32) else {
            continue;
        }; // unknown fields are left out
        let vals = &values[&num];
        if !first {
            out.push(',');
        }
        first = false;
        indent(out, depth + 1);
        quote(&json_name(f), out);
        out.push_str(": ");
        let entry = (f.r#type() == Type::Message)
            .then(|| schema.messages.get(f.type_name().trim_start_matches('.')))
            .flatten()
            .filter(|m| m.options.as_ref().is_some_and(|o| o.map_entry()));
        if let Some(entry) = entry {
            map(schema, entry, vals, out, depth + 1)?;
        } else if f.label() == Label::Repeated {
            out.push('[');
            for (k, v) in vals.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                indent(out, depth + 2);
                scalar(schema, f, v, out, depth + 2)?;
            }
            indent(out, depth + 1);
            out.push(']');
        } else {
            scalar(schema, f, vals.last().unwrap(), out, depth + 1)?;
        }
    }
    if !first {
        indent(out, depth);
    }
    out.push('}');
    Ok(())
}

/// A map field: its entries (messages of a key and a value field) as one object keyed by the key's
/// text.
fn map(
    schema: &Schema,
    entry: &DescriptorProto,
    vals: &[Wire],
    out: &mut String,
    depth: usize,
) -> Result<(), String> {
    let (Some(kf), Some(vf)) = (
        entry.field.iter().find(|f| f.number() == 1),
        entry.field.iter().find(|f| f.number() == 2),
    ) else {
        return Err(format!("map entry {} without key and value", entry.name()));
    };
    out.push('{');
    for (k, v) in vals.iter().enumerate() {
        let Wire::Bytes(b) = v else {
            return Err(format!("map {}: not a message", entry.name()));
        };
        let fs = fields(b)?;
        let mut key = String::new();
        match fs.iter().rev().find(|(n, _)| *n == 1) {
            Some((_, w)) => scalar(schema, kf, w, &mut key, 0)?,
            None => key.push_str(if kf.r#type() == Type::String {
                "\"\""
            } else {
                "0"
            }),
        }
        if k > 0 {
            out.push(',');
        }
        indent(out, depth + 1);
        if key.starts_with('"') {
            out.push_str(&key);
        } else {
            quote(&key, out);
        }
        out.push_str(": ");
        match fs.iter().rev().find(|(n, _)| *n == 2) {
            Some((_, w)) => scalar(schema, vf, w, out, depth + 1)?,
            None if vf.r#type() == Type::Message => out.push_str("{}"),
            None => out.push_str(if vf.r#type() == Type::String {
                "\"\""
            } else {
                "0"
            }),
        }
    }
    if !vals.is_empty() {
        indent(out, depth);
    }
    out.push('}');
    Ok(())
}

/// `google.protobuf.Any`: `{"@type": URL, ...the packed message's fields}` when its type is in the
/// descriptors, else `{"@type": URL, "value": base64}`.
fn any(schema: &Schema, b: &[u8], out: &mut String, depth: usize) -> Result<(), String> {
    let (mut url, mut value): (&str, &[u8]) = ("", &[]);
    for (num, v) in fields(b)? {
        match (num, v) {
            (1, Wire::Bytes(s)) => {
                url = std::str::from_utf8(s).map_err(|_| "Any.type_url: not UTF-8")?
            }
            (2, Wire::Bytes(s)) => value = s,
            _ => {}
        }
    }
    let ty = url.rsplit('/').next().unwrap_or("");
    let mut inner = String::new();
    if schema.messages.contains_key(ty) {
        message(schema, ty, value, &mut inner, depth)?;
    } else {
        inner.push_str("{}");
    }
    out.push('{');
    indent(out, depth + 1);
    out.push_str("\"@type\": ");
    quote(url, out);
    if !schema.messages.contains_key(ty) {
        out.push(',');
        indent(out, depth + 1);
        out.push_str("\"value\": ");
        quote(&base64(value), out);
    } else if inner.len() > 2 {
        // the packed message's fields after "@type"
        out.push(',');
        out.push_str(
            inner
                .trim_start_matches('{')
                .trim_end_matches('}')
                .trim_end(),
        );
    }
    indent(out, depth);
    out.push('}');
    Ok(())
}
