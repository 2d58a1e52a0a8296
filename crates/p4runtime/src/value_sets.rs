//! P4Runtime's value sets (`ValueSetEntry`): the members of a parser value set, replaced (MODIFY)
//! and read back through the engine.

use crate::codec::{bytes_to_value, lpm_match, value_to_bytes};
use crate::indexed_entities::{modify_only, Up};
use crate::proto::p4::v1 as p4;
use p4sec_engine::Engine;
use p4sec_ir::Value;
use tonic::Status;

fn value_set_of(e: &Engine, id: u32) -> Result<(usize, &p4sec_ir::ValueSet), Status> {
    e.prog
        .value_sets
        .iter()
        .enumerate()
        .find(|(_, v)| v.id == id)
        .ok_or_else(|| Status::not_found(format!("no value set with id {id}")))
}

/// A value set's members replace the previous ones (MODIFY, as the specification prescribes). Each
/// member gives one FieldMatch per element of the set (match field ids 1..n, as in the P4Info), of
/// the element's match kind; exact elements also take a ternary match (select keysets take masks).
/// Ternary, LPM, range and optional elements may be left out (don't care); exact ones may not.
pub fn write_value_set(e: &Engine, ty: Up, v: &p4::ValueSetEntry) -> Result<(), Status> {
    use p4::field_match::FieldMatchType as M;
    use p4sec_ir::{FieldMatch, MatchKind};
    modify_only(ty, "value set")?;
    let (vi, vs) = value_set_of(e, v.value_set_id)?;
    if v.members.len() > vs.size as usize {
        return Err(Status::resource_exhausted(format!(
            "value set `{}` holds at most {} members, {} given",
            vs.name,
            vs.size,
            v.members.len()
        )));
    }
    let n = vs.widths.len();
    let mut members = vec![];
    for (mi, m) in v.members.iter().enumerate() {
        let mut fields: Vec<Option<FieldMatch>> = vec![None; n];
        for f in &m.r#match {
            let i = f.field_id as usize;
            if i == 0 || i > n {
                return Err(Status::invalid_argument(format!(
                    "value set `{}` has no match field id {} (it has ids 1 to {n})",
                    vs.name, f.field_id
                )));
            }
            let (w, kind) = (vs.widths[i - 1], vs.kind(i - 1));
            let fname = match vs.field_name(i - 1) {
                "" => format!("value set `{}`, member {}, field {i}", vs.name, mi + 1),
                x => format!(
                    "value set `{}`, member {}, field `{x}` (id {i})",
                    vs.name,
                    mi + 1
                ),
            };
            if fields[i - 1].is_some() {
                return Err(Status::invalid_argument(format!("{fname} is given twice")));
            }
            let all = Value {
                width: w,
                words: (0..p4sec_ir::words_for(w))
                    .map(|j| {
                        if (j + 1) * 64 <= w {
                            u64::MAX
                        } else {
                            (1u64 << (w % 64)) - 1
                        }
                    })
                    .collect(),
            };
            let fm = match (&f.field_match_type, kind) {
                (Some(M::Exact(x)), MatchKind::Exact) => {
                    FieldMatch::Exact(bytes_to_value(&x.value, w, &fname)?)
                }
                (Some(M::Ternary(x)), MatchKind::Exact | MatchKind::Ternary) => {
                    let value = bytes_to_value(&x.value, w, &fname)?;
                    let mask = bytes_to_value(&x.mask, w, &fname)?;
                    if value
                        .words
                        .iter()
                        .zip(&mask.words)
                        .any(|(v, m)| v & !m != 0)
                    {
                        return Err(Status::invalid_argument(format!(
                            "{fname}: the ternary value has bits outside the mask"
                        )));
                    }
                    if kind == MatchKind::Exact && mask == all {
                        FieldMatch::Exact(value)
                    } else {
                        FieldMatch::Ternary { value, mask }
                    }
                }
                (Some(M::Lpm(x)), MatchKind::Lpm) => lpm_match(x, w, &fname, true)?,
                (Some(M::Range(x)), MatchKind::Range) => {
                    let (lo, hi) = (
                        bytes_to_value(&x.low, w, &fname)?,
                        bytes_to_value(&x.high, w, &fname)?,
                    );
                    if lo.words.iter().rev().cmp(hi.words.iter().rev())
                        == std::cmp::Ordering::Greater
                    {
                        return Err(Status::invalid_argument(format!(
                            "{fname}: the range's low bound is above its high bound"
                        )));
                    }
                    FieldMatch::Range { lo, hi }
                }
                (Some(M::Optional(x)), MatchKind::Optional) => {
                    FieldMatch::Optional(Some(bytes_to_value(&x.value, w, &fname)?))
                }
                (None, _) => {
                    return Err(Status::invalid_argument(format!("{fname}: no match given")))
                }
                (Some(_), kind) => {
                    return Err(Status::invalid_argument(format!(
                        "{fname} is matched as {}",
                        kind_name(kind)
                    )))
                }
            };
            fields[i - 1] = Some(fm);
        }
        let mut member = vec![];
        for (i, f) in fields.into_iter().enumerate() {
            match f {
                Some(f) => member.push(f),
                None if vs.kind(i) == MatchKind::Exact => {
                    let what = match vs.field_name(i) {
                        "" => format!("field {}", i + 1),
                        x => format!("field `{x}` (id {})", i + 1),
                    };
                    return Err(Status::invalid_argument(format!(
                        "value set `{}`, member {}: exact {what} is missing",
                        vs.name,
                        mi + 1
                    )));
                }
                None => member.push(FieldMatch::Any),
            }
        }
        members.push(member);
    }
    e.value_set_set(vi, members).map_err(|m| {
        if m.contains("at most") {
            Status::resource_exhausted(m)
        } else {
            Status::invalid_argument(m)
        }
    })
}

fn kind_name(k: p4sec_ir::MatchKind) -> &'static str {
    use p4sec_ir::MatchKind as K;
    match k {
        K::Exact => "exact (or ternary)",
        K::Ternary => "ternary",
        K::Lpm => "lpm",
        K::Range => "range",
        K::Optional => "optional",
        K::Selector => "selector",
    }
}

pub fn read_value_set(
    e: &Engine,
    v: &p4::ValueSetEntry,
    out: &mut Vec<p4::Entity>,
) -> Result<(), Status> {
    use p4::field_match::FieldMatchType as M;
    use p4sec_ir::FieldMatch;
    let sets: Vec<usize> = e
        .prog
        .value_sets
        .iter()
        .enumerate()
        .filter(|(_, x)| v.value_set_id == 0 || x.id == v.value_set_id)
        .map(|(i, _)| i)
        .collect();
    if sets.is_empty() && v.value_set_id != 0 {
        return Err(Status::not_found(format!(
            "no value set with id {}",
            v.value_set_id
        )));
    }
    for vi in sets {
        let vs = &e.prog.value_sets[vi];
        let members = e
            .value_set_get(vi)
            .map_err(Status::internal)?
            .into_iter()
            .map(|member| p4::ValueSetMember {
                r#match: member
                    .iter()
                    .enumerate()
                    .filter_map(|(i, f)| {
                        let t = match f {
                            FieldMatch::Exact(x) => M::Exact(p4::field_match::Exact {
                                value: value_to_bytes(x),
                            }),
                            FieldMatch::Ternary { value, mask } => {
                                M::Ternary(p4::field_match::Ternary {
                                    value: value_to_bytes(value),
                                    mask: value_to_bytes(mask),
                                })
                            }
                            FieldMatch::Lpm { value, prefix_len } => M::Lpm(p4::field_match::Lpm {
                                value: value_to_bytes(value),
                                prefix_len: *prefix_len as i32,
                            }),
                            FieldMatch::Range { lo, hi } => M::Range(p4::field_match::Range {
                                low: value_to_bytes(lo),
                                high: value_to_bytes(hi),
                            }),
                            FieldMatch::Optional(Some(x)) => {
                                M::Optional(p4::field_match::Optional {
                                    value: value_to_bytes(x),
                                })
                            }
                            FieldMatch::Optional(None) | FieldMatch::Any => return None,
                        };
                        Some(p4::FieldMatch {
                            field_id: i as u32 + 1,
                            field_match_type: Some(t),
                        })
                    })
                    .collect(),
            })
            .collect();
        out.push(p4::Entity {
            entity: Some(p4::entity::Entity::ValueSetEntry(p4::ValueSetEntry {
                value_set_id: vs.id,
                members,
            })),
        });
    }
    Ok(())
}
