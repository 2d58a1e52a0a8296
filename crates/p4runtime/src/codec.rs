//! Conversion between P4Runtime messages and the program's IR: byte strings and values, table
//! entries and their matches, actions, meter configurations, and the controller-header fields of
//! packet-in/out.

use crate::proto::p4::v1 as p4;
use p4sec_engine::meters::MeterRates;
use p4sec_ir::{ActionCall, FieldMatch, MatchKind, Program, Table, TableEntry, Value};
use tonic::Status;

/// Bits `[pos, pos + width)` of `b` (MSB first) as a value.
pub(crate) fn read_field(b: &[u8], pos: usize, width: u32) -> Value {
    let n = p4sec_ir::words_for(width) as usize;
    let mut words = vec![0u64; n];
    for i in 0..width as usize {
        let bit = (b[(pos + i) / 8] >> (7 - (pos + i) % 8)) & 1;
        let k = width as usize - 1 - i; // bit index from the least significant end
        words[k / 64] |= (bit as u64) << (k % 64);
    }
    Value { width, words }
}

/// Write `v` into bits `[pos, pos + width)` of `b` (MSB first).
pub(crate) fn write_field(b: &mut [u8], pos: usize, width: u32, v: &Value) {
    for i in 0..width as usize {
        let k = width as usize - 1 - i;
        let bit = (v.words.get(k / 64).copied().unwrap_or(0) >> (k % 64)) & 1;
        if bit == 1 {
            b[(pos + i) / 8] |= 0x80 >> ((pos + i) % 8);
        }
    }
}

pub(crate) fn eid(e: &Option<p4::Uint128>) -> u128 {
    e.as_ref()
        .map(|e| ((e.high as u128) << 64) | e.low as u128)
        .unwrap_or(0)
}

pub(crate) fn to_uint128(v: u128) -> p4::Uint128 {
    p4::Uint128 {
        high: (v >> 64) as u64,
        low: v as u64,
    }
}

/// P4Runtime byte string → value of `width` bits (P4Runtime specification, "Bytestrings"): the
/// receiver puts no limit on the string's length, only on the value it encodes, so leading zero
/// bytes are accepted however many there are; a value with more significant bits than the field is
/// OUT_OF_RANGE. An empty string encodes no value: INVALID_ARGUMENT (zero is one zero byte).
pub(crate) fn bytes_to_value(b: &[u8], width: u32, what: &str) -> Result<Value, Status> {
    bytes_to_value_of(b, width, || what.to_string())
}

/// [`bytes_to_value`] whose name for errors is made only for an error (no string built per
/// value written).
pub(crate) fn bytes_to_value_of(
    b: &[u8],
    width: u32,
    what: impl FnOnce() -> String,
) -> Result<Value, Status> {
    if b.is_empty() {
        return Err(Status::invalid_argument(format!(
            "{}: the value is an empty byte string (zero is one zero byte)",
            what()
        )));
    }
    let first = b.iter().position(|x| *x != 0).unwrap_or(b.len());
    let sig = &b[first..];
    let bits = if sig.is_empty() {
        0
    } else {
        (sig.len() as u64 - 1) * 8 + (8 - sig[0].leading_zeros()) as u64
    };
    if bits > width as u64 {
        return Err(Status::out_of_range(format!(
            "{}: the value has {bits} significant bits, the field has {width}",
            what()
        )));
    }
    let n = p4sec_ir::words_for(width) as usize;
    let mut words = vec![0u64; n];
    for (i, byte) in sig.iter().rev().enumerate() {
        words[i / 8] |= (*byte as u64) << (8 * (i % 8));
    }
    Ok(Value { width, words })
}

/// An LPM match as the specification requires it: prefix length 1 to the field's width (0 matches
/// everything: the field is then omitted) and no value bits outside the prefix.
pub(crate) fn lpm_match(
    x: &p4::field_match::Lpm,
    width: u32,
    what: &str,
    zero_allowed: bool,
) -> Result<FieldMatch, Status> {
    if x.prefix_len < 0 || x.prefix_len as u32 > width {
        return Err(Status::invalid_argument(format!(
            "lpm field `{what}`: prefix length {} out of range (0 to {width})",
            x.prefix_len
        )));
    }
    if x.prefix_len == 0 && !zero_allowed {
        return Err(Status::invalid_argument(format!("lpm field `{what}`: a prefix length of 0 matches everything: omit the field (a don't-care match)")));
    }
    let value = bytes_to_value(&x.value, width, what)?;
    let host = width - x.prefix_len as u32;
    let outside = value.words.iter().enumerate().any(|(i, w)| {
        let lo = i as u32 * 64;
        let mask = if host <= lo {
            0
        } else if host >= lo + 64 {
            u64::MAX
        } else {
            (1u64 << (host - lo)) - 1
        };
        w & mask != 0
    });
    if outside {
        return Err(Status::invalid_argument(format!(
            "lpm field `{what}`: the value has bits set outside its /{} prefix (not canonical)",
            x.prefix_len
        )));
    }
    Ok(FieldMatch::Lpm {
        value,
        prefix_len: x.prefix_len as u32,
    })
}

/// Value → canonical byte string (no leading zero bytes; zero is one zero byte).
pub(crate) fn value_to_bytes(v: &Value) -> Vec<u8> {
    let mut out = vec![];
    for w in v.words.iter().rev() {
        out.extend_from_slice(&w.to_be_bytes());
    }
    let first = out.iter().position(|x| *x != 0).unwrap_or(out.len() - 1);
    out[first..].to_vec()
}

pub(crate) fn table_of(prog: &Program, id: u32) -> Result<(usize, &Table), Status> {
    prog.tables
        .iter()
        .enumerate()
        .find(|(_, t)| t.id == id)
        .ok_or_else(|| Status::not_found(format!("no table with id {id}")))
}

pub(crate) fn action_call(
    prog: &Program,
    t: &Table,
    a: &p4::Action,
    default: bool,
) -> Result<ActionCall, Status> {
    let ta = t
        .actions
        .iter()
        .find(|x| prog.actions[x.action as usize].id == a.action_id)
        .ok_or_else(|| {
            Status::invalid_argument(format!(
                "action id {} is not an action of table `{}`",
                a.action_id, t.name
            ))
        })?;
    if ta.default_only && !default {
        return Err(Status::invalid_argument(format!(
            "action `{}` is default-only in `{}`",
            prog.actions[ta.action as usize].name, t.name
        )));
    }
    let act = &prog.actions[ta.action as usize];
    if a.params.len() != act.params.len() {
        return Err(Status::invalid_argument(format!(
            "action `{}` takes {} parameters, {} given",
            act.name,
            act.params.len(),
            a.params.len()
        )));
    }
    let mut args = Vec::with_capacity(act.params.len());
    for p in &act.params {
        let given = a
            .params
            .iter()
            .find(|x| x.param_id == p.id)
            .ok_or_else(|| {
                Status::invalid_argument(format!("missing parameter `{}` (id {})", p.name, p.id))
            })?;
        args.push(bytes_to_value_of(&given.value, p.loc.width, || {
            format!("parameter `{}`", p.name)
        })?);
    }
    Ok(ActionCall {
        action: ta.action,
        args,
    })
}

pub(crate) fn to_entry(
    prog: &Program,
    t: &Table,
    e: &p4::TableEntry,
) -> Result<TableEntry, Status> {
    to_entry_with(prog, t, e, true)
}

/// The match part of a table entry (for entities that name an entry: direct counters and meters);
/// the action, if any, is ignored and the table's default action stands in.
pub(crate) fn to_match(
    prog: &Program,
    t: &Table,
    e: &p4::TableEntry,
) -> Result<TableEntry, Status> {
    to_entry_with(prog, t, e, false)
}

fn to_entry_with(
    prog: &Program,
    t: &Table,
    e: &p4::TableEntry,
    want_action: bool,
) -> Result<TableEntry, Status> {
    use p4::field_match::FieldMatchType as M;
    let mut matches = vec![];
    for k in &t.keys {
        let given = e.r#match.iter().find(|m| m.field_id == k.id);
        let m = match (given.and_then(|g| g.field_match_type.as_ref()), k.kind) {
            (None, MatchKind::Exact) => {
                return Err(Status::invalid_argument(format!(
                    "exact field `{}` (id {}) is missing",
                    k.name, k.id
                )))
            }
            (None, _) => FieldMatch::Any,
            (Some(M::Exact(x)), MatchKind::Exact | MatchKind::Selector) => {
                FieldMatch::Exact(bytes_to_value(&x.value, k.width, &k.name)?)
            }
            (Some(M::Ternary(x)), MatchKind::Ternary) => {
                let value = bytes_to_value(&x.value, k.width, &k.name)?;
                let mask = bytes_to_value(&x.mask, k.width, &k.name)?;
                if value
                    .words
                    .iter()
                    .zip(&mask.words)
                    .any(|(v, m)| v & !m != 0)
                {
                    return Err(Status::invalid_argument(format!(
                        "ternary field `{}`: value has bits outside the mask",
                        k.name
                    )));
                }
                if mask.words.iter().all(|m| *m == 0) {
                    return Err(Status::invalid_argument(format!(
                        "ternary field `{}`: a mask of 0 matches everything: omit the field (a don't-care match)",
                        k.name
                    )));
                }
                FieldMatch::Ternary { value, mask }
            }
            (Some(M::Lpm(x)), MatchKind::Lpm) => lpm_match(x, k.width, &k.name, false)?,
            (Some(M::Range(x)), MatchKind::Range) => FieldMatch::Range {
                lo: bytes_to_value(&x.low, k.width, &k.name)?,
                hi: bytes_to_value(&x.high, k.width, &k.name)?,
            },
            (Some(M::Optional(x)), MatchKind::Optional) => {
                FieldMatch::Optional(Some(bytes_to_value(&x.value, k.width, &k.name)?))
            }
            (Some(_), kind) => {
                return Err(Status::invalid_argument(format!(
                    "field `{}` is matched as {kind:?}",
                    k.name
                )))
            }
        };
        matches.push(m);
    }
    for m in &e.r#match {
        if !t.keys.iter().any(|k| k.id == m.field_id) {
            return Err(Status::invalid_argument(format!(
                "table `{}` has no match field id {}",
                t.name, m.field_id
            )));
        }
    }
    let needs_priority = t.keys.iter().any(|k| {
        matches!(
            k.kind,
            MatchKind::Ternary | MatchKind::Range | MatchKind::Optional
        )
    });
    if needs_priority && e.priority <= 0 {
        return Err(Status::invalid_argument(format!(
            "table `{}` needs a positive priority",
            t.name
        )));
    }
    if !needs_priority && e.priority != 0 {
        return Err(Status::invalid_argument(format!(
            "table `{}` has no ternary/range/optional field: priority must be 0",
            t.name
        )));
    }
    if !want_action {
        return Ok(TableEntry {
            matches,
            action: t.default_action.clone(),
            priority: e.priority,
        });
    }
    let action = match e.action.as_ref().and_then(|a| a.r#type.as_ref()) {
        Some(p4::table_action::Type::Action(a)) => action_call(prog, t, a, false)?,
        Some(_) => {
            return Err(Status::invalid_argument(format!(
                "table `{}` has no action profile: its entries take an action, not a member, group or action set",
                t.name
            )))
        }
        None => return Err(Status::invalid_argument("the table entry has no action")),
    };
    Ok(TableEntry {
        matches,
        action,
        priority: e.priority,
    })
}

/// The action of a default-entry MODIFY: the given action, or the program's default action when
/// unset.
pub(crate) fn default_action(
    prog: &Program,
    t: &Table,
    te: &p4::TableEntry,
) -> Result<ActionCall, Status> {
    match te.action.as_ref().and_then(|a| a.r#type.as_ref()) {
        Some(p4::table_action::Type::Action(a)) => action_call(prog, t, a, true),
        Some(_) => Err(Status::unimplemented(format!(
            "table `{}`: the default entry takes an action, not a member, group or action set",
            t.name
        ))),
        None => Ok(t.default_action.clone()),
    }
}

/// An action call as a P4Runtime action.
pub(crate) fn action_to_p4(prog: &Program, a: &ActionCall) -> p4::Action {
    let act = &prog.actions[a.action as usize];
    let params = act
        .params
        .iter()
        .zip(&a.args)
        .map(|(p, v)| p4::action::Param {
            param_id: p.id,
            value: value_to_bytes(v),
        })
        .collect();
    p4::Action {
        action_id: act.id,
        params,
    }
}

pub(crate) fn meter_rates(c: &p4::MeterConfig, what: &str) -> Result<MeterRates, Status> {
    if c.cir < 0 || c.cburst < 0 || c.pir < 0 || c.pburst < 0 {
        return Err(Status::invalid_argument(format!(
            "{what}: meter rates and bursts cannot be negative"
        )));
    }
    if c.pir < c.cir {
        return Err(Status::invalid_argument(format!(
            "{what}: the peak rate ({}) is below the committed rate ({})",
            c.pir, c.cir
        )));
    }
    if c.eburst != 0 {
        return Err(Status::invalid_argument(format!(
            "{what}: eburst is for single-rate meters; these are two-rate three-color meters"
        )));
    }
    Ok(MeterRates {
        cir: c.cir as u64,
        cbs: c.cburst as u64,
        pir: c.pir as u64,
        pbs: c.pburst as u64,
    })
}

pub(crate) fn meter_config(r: &MeterRates) -> p4::MeterConfig {
    p4::MeterConfig {
        cir: r.cir as i64,
        cburst: r.cbs as i64,
        pir: r.pir as i64,
        pburst: r.pbs as i64,
        eburst: 0,
    }
}

pub(crate) fn from_entry(
    prog: &Program,
    t: &Table,
    e: &TableEntry,
    packets: u64,
    bytes: u64,
) -> p4::TableEntry {
    use p4::field_match::FieldMatchType as M;
    let mut ms = vec![];
    for (k, m) in t.keys.iter().zip(&e.matches) {
        let fm = match m {
            FieldMatch::Any => continue,
            FieldMatch::Exact(v) => M::Exact(p4::field_match::Exact {
                value: value_to_bytes(v),
            }),
            FieldMatch::Ternary { value, mask } => M::Ternary(p4::field_match::Ternary {
                value: value_to_bytes(value),
                mask: value_to_bytes(mask),
            }),
            FieldMatch::Lpm { value, prefix_len } => M::Lpm(p4::field_match::Lpm {
                value: value_to_bytes(value),
                prefix_len: *prefix_len as i32,
            }),
            FieldMatch::Range { lo, hi } => M::Range(p4::field_match::Range {
                low: value_to_bytes(lo),
                high: value_to_bytes(hi),
            }),
            FieldMatch::Optional(Some(v)) => M::Optional(p4::field_match::Optional {
                value: value_to_bytes(v),
            }),
            FieldMatch::Optional(None) => continue,
        };
        ms.push(p4::FieldMatch {
            field_id: k.id,
            field_match_type: Some(fm),
        });
    }
    p4::TableEntry {
        table_id: t.id,
        r#match: ms,
        action: Some(p4::TableAction {
            r#type: Some(p4::table_action::Type::Action(action_to_p4(
                prog, &e.action,
            ))),
        }),
        priority: e.priority,
        counter_data: t.direct_counter.map(|_| p4::CounterData {
            byte_count: bytes as i64,
            packet_count: packets as i64,
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn router() -> Program {
        p4sec_frontend::compile_str(
            "ipv4_router.p4",
            include_str!("../../../programs/ipv4_router.p4"),
            &Default::default(),
        )
        .unwrap()
    }

    fn lpm_entry(value: &[u8], prefix_len: i32) -> p4::TableEntry {
        let lpm = p4::field_match::Lpm {
            value: value.to_vec(),
            prefix_len,
        };
        p4::TableEntry {
            table_id: 0,
            r#match: vec![p4::FieldMatch {
                field_id: 1,
                field_match_type: Some(p4::field_match::FieldMatchType::Lpm(lpm)),
            }],
            ..Default::default()
        }
    }

    /// Only the canonical form of an LPM match is accepted: `10.0.0.1/8` and `10.255.0.0/8` are not
    /// `10.0.0.0/8`, and `/0` is written by omitting the field.
    #[test]
    fn lpm_values_must_be_canonical() {
        let prog = router();
        let t = &prog.tables[0];
        assert!(to_match(&prog, t, &lpm_entry(&[10, 0, 0, 0], 8)).is_ok());
        assert!(to_match(&prog, t, &lpm_entry(&[10, 0, 1, 0], 24)).is_ok());
        assert!(to_match(&prog, t, &lpm_entry(&[10, 0, 0, 1], 32)).is_ok());
        for (v, len) in [
            (&[10u8, 0, 0, 1][..], 8),
            (&[10, 255, 0, 0][..], 8),
            (&[10, 0, 1, 1][..], 31),
        ] {
            let e = to_match(&prog, t, &lpm_entry(v, len)).unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument);
            assert!(e.message().contains("outside its"), "{}", e.message());
        }
        let e = to_match(&prog, t, &lpm_entry(&[0], 0)).unwrap_err();
        assert!(
            e.code() == Code::InvalidArgument && e.message().contains("omit the field"),
            "{}",
            e.message()
        );
        // omitted: a don't-care
        let any = p4::TableEntry {
            table_id: 0,
            ..Default::default()
        };
        assert_eq!(
            to_match(&prog, t, &any).unwrap().matches,
            vec![FieldMatch::Any]
        );
    }

    /// Byte strings: empty is refused; any number of leading zero bytes is accepted (the
    /// specification limits the value, not the string); a value wider than the field is
    /// OUT_OF_RANGE however it is padded; the canonical form written back has no leading zeros.
    #[test]
    fn byte_strings_follow_the_specification() {
        assert_eq!(bytes_to_value(&[0x01], 9, "p").unwrap(), Value::new(9, 1));
        assert_eq!(
            bytes_to_value(&[0x00, 0x01], 9, "p").unwrap(),
            Value::new(9, 1)
        );
        assert_eq!(bytes_to_value(&[0x00], 9, "p").unwrap(), Value::new(9, 0));
        assert_eq!(
            bytes_to_value(&[0x00, 0x00, 0x00], 9, "p").unwrap(),
            Value::new(9, 0)
        );
        let e = bytes_to_value(&[], 9, "p").unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("empty byte string"), "{}", e.message());
        // longer than the field's two bytes, zero padded: the value 1
        assert_eq!(
            bytes_to_value(&[0x00, 0x00, 0x01], 9, "p").unwrap(),
            Value::new(9, 1)
        );
        let mut long = vec![0u8; 1000];
        long.push(0x01);
        long.push(0xFF);
        assert_eq!(bytes_to_value(&long, 9, "p").unwrap(), Value::new(9, 0x1FF));
        // a 128-bit field written in 20 bytes
        let mut wide = vec![0u8; 4];
        wide.extend_from_slice(&[0xAB; 16]);
        let v = bytes_to_value(&wide, 128, "k").unwrap();
        assert_eq!(value_to_bytes(&v), vec![0xAB; 16]);
        let e = bytes_to_value(&[0x02, 0x00], 9, "p").unwrap_err();
        assert_eq!(e.code(), Code::OutOfRange);
        assert!(
            e.message().contains("10 significant bits"),
            "{}",
            e.message()
        );
        // padding does not hide a value too wide: 0x010000 for a bit<16>
        let e = bytes_to_value(&[0x00, 0x01, 0x00, 0x00], 16, "k").unwrap_err();
        assert_eq!(e.code(), Code::OutOfRange);
        assert!(
            e.message().contains("17 significant bits"),
            "{}",
            e.message()
        );
        // reads give the canonical form: no leading zero bytes, zero as one zero byte
        assert_eq!(value_to_bytes(&Value::new(9, 1)), vec![0x01]);
        assert_eq!(value_to_bytes(&Value::new(9, 0)), vec![0x00]);
        assert_eq!(value_to_bytes(&Value::new(16, 0x100)), vec![0x01, 0x00]);
    }

    /// A ternary mask of 0 is a don't-care: the field must be omitted.
    #[test]
    fn a_zero_ternary_mask_is_refused() {
        let src = "#include <core.p4>\n#include <v1model.p4>\nheader h_t { bit<16> a; }\nstruct H { h_t h; }\nstruct M {}\n\
            parser P(packet_in p, out H h, inout M m, inout standard_metadata_t s) { state start { p.extract(h.h); transition accept; } }\n\
            control V(inout H h, inout M m) { apply {} }\n\
            control I(inout H h, inout M m, inout standard_metadata_t s) { action a() {} table t { key = { h.h.a : ternary; } actions = { a; } } apply { t.apply(); } }\n\
            control E(inout H h, inout M m, inout standard_metadata_t s) { apply {} }\n\
            control C(inout H h, inout M m) { apply {} }\n\
            control D(packet_out p, in H h) { apply { p.emit(h.h); } }\n\
            V1Switch(P(), V(), I(), E(), C(), D()) main;\n";
        let prog = p4sec_frontend::compile_str("t.p4", src, &Default::default()).unwrap();
        let t = &prog.tables[0];
        let entry = |mask: &[u8]| {
            let x = p4::field_match::Ternary {
                value: vec![0],
                mask: mask.to_vec(),
            };
            p4::TableEntry {
                r#match: vec![p4::FieldMatch {
                    field_id: 1,
                    field_match_type: Some(p4::field_match::FieldMatchType::Ternary(x)),
                }],
                priority: 1,
                ..Default::default()
            }
        };
        assert!(to_match(&prog, t, &entry(&[0xff])).is_ok());
        let e = to_match(&prog, t, &entry(&[0])).unwrap_err();
        assert!(
            e.code() == Code::InvalidArgument && e.message().contains("omit the field"),
            "{}",
            e.message()
        );
    }
}
