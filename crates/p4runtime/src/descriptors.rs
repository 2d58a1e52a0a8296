//! The P4Runtime protos' descriptors (kept by `build.rs`) and a reader of protobuf's wire format
//! driven by them: what the JSON (`json.rs`) and text-format (`text.rs`) writers of a message walk.

use prost::Message;
use prost_types::field_descriptor_proto::Type;
use prost_types::FieldDescriptorProto;
use prost_types::{DescriptorProto, FileDescriptorSet};
use std::collections::HashMap;

/// The FileDescriptorSet of the P4Runtime protos (and what they import), as build.rs read it.
const DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/p4runtime_descriptors.bin"));

/// The message types of the descriptor set by full name (`p4.config.v1.P4Info`) with their enums.
pub(crate) struct Schema {
    pub(crate) messages: HashMap<String, DescriptorProto>,
    pub(crate) enums: HashMap<String, HashMap<i32, String>>,
}

impl Schema {
    pub(crate) fn load() -> Result<Schema, String> {
        let fds = FileDescriptorSet::decode(DESCRIPTORS)
            .map_err(|e| format!("the P4Runtime descriptors: {e}"))?;
        let mut s = Schema {
            messages: HashMap::new(),
            enums: HashMap::new(),
        };
        for f in &fds.file {
            let pkg = f.package();
            for e in &f.enum_type {
                s.add_enum(&format!("{pkg}.{}", e.name()), e);
            }
            for m in &f.message_type {
                s.add_message(&format!("{pkg}.{}", m.name()), m);
            }
        }
        Ok(s)
    }

    fn add_enum(&mut self, name: &str, e: &prost_types::EnumDescriptorProto) {
        self.enums.insert(
            name.to_string(),
            e.value
                .iter()
                .map(|v| (v.number(), v.name().to_string()))
                .collect(),
        );
    }

    fn add_message(&mut self, name: &str, m: &DescriptorProto) {
        for e in &m.enum_type {
            self.add_enum(&format!("{name}.{}", e.name()), e);
        }
        for n in &m.nested_type {
            self.add_message(&format!("{name}.{}", n.name()), n);
        }
        self.messages.insert(name.to_string(), m.clone());
    }
}

/// One decoded field value as it appeared on the wire.
pub(crate) enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Bytes(&'a [u8]),
}

pub(crate) fn varint(b: &[u8], i: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*i).ok_or("truncated varint")?;
        *i += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint longer than 10 bytes".into())
}

/// The fields of a message in wire order: (field number, value).
pub(crate) fn fields(b: &[u8]) -> Result<Vec<(u32, Wire<'_>)>, String> {
    let mut out = vec![];
    let mut i = 0;
    while i < b.len() {
        let key = varint(b, &mut i)?;
        let (num, wt) = ((key >> 3) as u32, key & 7);
        let take = |i: &mut usize, n: usize| -> Result<&[u8], String> {
            let s = b.get(*i..*i + n).ok_or("truncated field")?;
            *i += n;
            Ok(s)
        };
        let v = match wt {
            0 => Wire::Varint(varint(b, &mut i)?),
            1 => Wire::Fixed64(u64::from_le_bytes(take(&mut i, 8)?.try_into().unwrap())),
            2 => {
                let n = varint(b, &mut i)? as usize;
                Wire::Bytes(take(&mut i, n)?)
            }
            5 => Wire::Fixed32(u32::from_le_bytes(take(&mut i, 4)?.try_into().unwrap())),
            _ => return Err(format!("field {num}: wire type {wt} not supported")),
        };
        out.push((num, v));
    }
    Ok(out)
}

/// The values of a packed repeated scalar field.
pub(crate) fn unpack<'a>(ty: Type, b: &'a [u8]) -> Result<Vec<Wire<'a>>, String> {
    let mut out = vec![];
    let mut i = 0;
    while i < b.len() {
        out.push(match ty {
            Type::Fixed64 | Type::Sfixed64 | Type::Double => {
                let s = b.get(i..i + 8).ok_or("truncated packed field")?;
                i += 8;
                Wire::Fixed64(u64::from_le_bytes(s.try_into().unwrap()))
            }
            Type::Fixed32 | Type::Sfixed32 | Type::Float => {
                let s = b.get(i..i + 4).ok_or("truncated packed field")?;
                i += 4;
                Wire::Fixed32(u32::from_le_bytes(s.try_into().unwrap()))
            }
            _ => Wire::Varint(varint(b, &mut i)?),
        });
    }
    Ok(out)
}

/// One field value decoded by its declared type: what the JSON and text writers format, each in
/// its own syntax.
pub(crate) enum Scalar<'a> {
    /// An embedded message (its type name without the leading dot, its bytes).
    Message(&'a str, &'a [u8]),
    Str(&'a str),
    Bytes(&'a [u8]),
    Bool(bool),
    /// Any integer type of 32 bits or fewer.
    Int(i64),
    /// A 64-bit integer (the JSON mapping writes it as a string).
    Int64(i64),
    Uint64(u64),
    Float(f64),
    Float32(f32),
    /// An enum value: its name when the descriptors have it, and its number.
    Enum(Option<&'a str>, i32),
}

/// Field `f`'s value `v` decoded by the field's declared type; an error when the wire type does
/// not fit the declared one.
pub(crate) fn scalar<'a>(
    schema: &'a Schema,
    f: &'a FieldDescriptorProto,
    v: &Wire<'a>,
) -> Result<Scalar<'a>, String> {
    let ty = f.r#type();
    Ok(match (ty, v) {
        (Type::Message, Wire::Bytes(b)) => {
            Scalar::Message(f.type_name().trim_start_matches('.'), b)
        }
        (Type::String, Wire::Bytes(b)) => {
            Scalar::Str(std::str::from_utf8(b).map_err(|_| format!("{}: not UTF-8", f.name()))?)
        }
        (Type::Bytes, Wire::Bytes(b)) => Scalar::Bytes(b),
        (Type::Bool, Wire::Varint(x)) => Scalar::Bool(*x != 0),
        (Type::Int32, Wire::Varint(x)) => Scalar::Int(i64::from(*x as i32)),
        (Type::Uint32, Wire::Varint(x)) => Scalar::Int(i64::from(*x as u32)),
        (Type::Sint32, Wire::Varint(x)) => {
            Scalar::Int(i64::from(((*x as u32) >> 1) as i32 ^ -((*x & 1) as i32)))
        }
        (Type::Int64, Wire::Varint(x)) | (Type::Sfixed64, Wire::Fixed64(x)) => {
            Scalar::Int64(*x as i64)
        }
        (Type::Uint64, Wire::Varint(x)) | (Type::Fixed64, Wire::Fixed64(x)) => Scalar::Uint64(*x),
        (Type::Sint64, Wire::Varint(x)) => Scalar::Int64((*x >> 1) as i64 ^ -((*x & 1) as i64)),
        (Type::Double, Wire::Fixed64(x)) => Scalar::Float(f64::from_bits(*x)),
        (Type::Fixed32, Wire::Fixed32(x)) => Scalar::Int(i64::from(*x)),
        (Type::Sfixed32, Wire::Fixed32(x)) => Scalar::Int(i64::from(*x as i32)),
        (Type::Float, Wire::Fixed32(x)) => Scalar::Float32(f32::from_bits(*x)),
        (Type::Enum, Wire::Varint(x)) => Scalar::Enum(
            schema
                .enums
                .get(f.type_name().trim_start_matches('.'))
                .and_then(|e| e.get(&(*x as i32)))
                .map(String::as_str),
            *x as i32,
        ),
        _ => {
            return Err(format!(
                "field {}: unexpected wire type for {ty:?}",
                f.name()
            ))
        }
    })
}
