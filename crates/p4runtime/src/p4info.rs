//! The P4Info of a compiled program: the one builder of the protobuf message
//! (`p4.config.v1.P4Info`), for the switch's `--program` start-up, the P4Runtime server and every
//! file `p4sec compile` writes (binary as it is; text and JSON from its bytes by `text.rs` and
//! `json.rs`). Ids, names and aliases follow the reference compiler's rules (`p4sec_ir::p4info`).

use crate::proto::p4::config::v1 as cfg;
use p4sec_ir::p4info::{extern_id, extern_type_id, program_aliases};
use p4sec_ir::p4info_meta::{translation_of, SdnType};
use p4sec_ir::{CounterUnit, Implementation, MatchKind, Program};

fn unit(u: CounterUnit) -> i32 {
    (match u {
        CounterUnit::Packets => cfg::counter_spec::Unit::Packets,
        CounterUnit::Bytes => cfg::counter_spec::Unit::Bytes,
        CounterUnit::Both => cfg::counter_spec::Unit::Both,
    }) as i32
}

fn meter_unit(u: CounterUnit) -> i32 {
    (match u {
        CounterUnit::Bytes => cfg::meter_spec::Unit::Bytes,
        _ => cfg::meter_spec::Unit::Packets,
    }) as i32
}

pub fn p4info(p: &Program) -> cfg::P4Info {
    let al = program_aliases(p);
    let pre = |id: u32, name: &str| cfg::Preamble {
        id,
        name: name.into(),
        alias: al.get(name).cloned().unwrap_or_else(|| name.into()),
        ..Default::default()
    };
    let mut info = cfg::P4Info {
        pkg_info: Some(cfg::PkgInfo {
            arch: "v1model".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    for t in &p.tables {
        let match_fields = t
            .keys
            .iter()
            .filter(|k| k.kind != MatchKind::Selector)
            .map(|k| {
                use cfg::match_field::{Match, MatchType};
                let m = match k.kind {
                    MatchKind::Exact => Match::MatchType(MatchType::Exact as i32),
                    MatchKind::Ternary => Match::MatchType(MatchType::Ternary as i32),
                    MatchKind::Lpm => Match::MatchType(MatchType::Lpm as i32),
                    MatchKind::Range => Match::MatchType(MatchType::Range as i32),
                    _ => Match::OtherMatchType("optional".into()),
                };
                cfg::MatchField {
                    id: k.id,
                    name: k.name.clone(),
                    bitwidth: k.width as i32,
                    r#match: Some(m),
                    ..Default::default()
                }
            })
            .collect();
        let action_refs = t
            .actions
            .iter()
            .map(|ta| {
                let scope = if ta.default_only {
                    cfg::action_ref::Scope::DefaultOnly
                } else if ta.table_only {
                    cfg::action_ref::Scope::TableOnly
                } else {
                    cfg::action_ref::Scope::TableAndDefault
                };
                cfg::ActionRef {
                    id: p.actions[ta.action as usize].id,
                    scope: scope as i32,
                    ..Default::default()
                }
            })
            .collect();
        let mut direct = vec![];
        if let Some(c) = t.direct_counter {
            direct.push(p.direct_counters[c as usize].id);
        }
        if let Some(m) = t.direct_meter {
            direct.push(p.direct_meters[m as usize].id);
        }
        info.tables.push(cfg::Table {
            preamble: Some(pre(t.id, &t.name)),
            match_fields,
            action_refs,
            const_default_action_id: if t.default_is_const {
                p.actions[t.default_action.action as usize].id
            } else {
                0
            },
            implementation_id: match t.implementation {
                Implementation::ActionProfile(i) | Implementation::ActionSelector(i) => {
                    p.action_profiles[i as usize].id
                }
                Implementation::None => 0,
            },
            direct_resource_ids: direct,
            size: t.size as i64,
            idle_timeout_behavior: if t.support_timeout {
                cfg::table::IdleTimeoutBehavior::NotifyControl as i32
            } else {
                0
            },
            is_const_table: t.entries_are_const,
            ..Default::default()
        });
    }
    let mut done = std::collections::HashSet::new();
    for a in &p.actions {
        if !done.insert(a.id) {
            continue;
        }
        let params = a
            .params
            .iter()
            .map(|x| cfg::action::Param {
                id: x.id,
                name: x.name.clone(),
                bitwidth: x.loc.width as i32,
                ..Default::default()
            })
            .collect();
        info.actions.push(cfg::Action {
            preamble: Some(pre(a.id, &a.name)),
            params,
        });
    }
    for ap in &p.action_profiles {
        info.action_profiles.push(cfg::ActionProfile {
            preamble: Some(pre(ap.id, &ap.name)),
            table_ids: ap.tables.iter().map(|t| p.tables[*t as usize].id).collect(),
            with_selector: ap.selector.is_some(),
            size: ap.size as i64,
            ..Default::default()
        });
    }
    for c in &p.counters {
        info.counters.push(cfg::Counter {
            preamble: Some(pre(c.id, &c.name)),
            spec: Some(cfg::CounterSpec { unit: unit(c.unit) }),
            size: c.size as i64,
            ..Default::default()
        });
    }
    for c in &p.direct_counters {
        info.direct_counters.push(cfg::DirectCounter {
            preamble: Some(pre(c.id, &c.name)),
            spec: Some(cfg::CounterSpec { unit: unit(c.unit) }),
            direct_table_id: c.table.map(|t| p.tables[t as usize].id).unwrap_or(0),
        });
    }
    for m in &p.meters {
        info.meters.push(cfg::Meter {
            preamble: Some(pre(m.id, &m.name)),
            spec: Some(cfg::MeterSpec {
                unit: meter_unit(m.unit),
                ..Default::default()
            }),
            size: m.size as i64,
            ..Default::default()
        });
    }
    for m in &p.direct_meters {
        info.direct_meters.push(cfg::DirectMeter {
            preamble: Some(pre(m.id, &m.name)),
            spec: Some(cfg::MeterSpec {
                unit: meter_unit(m.unit),
                ..Default::default()
            }),
            direct_table_id: m.table.map(|t| p.tables[t as usize].id).unwrap_or(0),
        });
    }
    for ch in &p.controller_headers {
        info.controller_packet_metadata
            .push(cfg::ControllerPacketMetadata {
                preamble: Some(cfg::Preamble {
                    id: ch.id,
                    name: ch.name.clone(),
                    alias: ch.name.clone(),
                    ..Default::default()
                }),
                metadata: ch
                    .fields
                    .iter()
                    .map(|(n, id, w)| cfg::controller_packet_metadata::Metadata {
                        id: *id,
                        name: n.clone(),
                        bitwidth: *w as i32,
                        ..Default::default()
                    })
                    .collect(),
            });
    }
    for v in &p.value_sets {
        info.value_sets.push(cfg::ValueSet {
            preamble: Some(pre(v.id, &v.name)),
            r#match: v
                .widths
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    use cfg::match_field::MatchType as T;
                    let kind = match v.kind(i) {
                        MatchKind::Ternary => T::Ternary,
                        MatchKind::Lpm => T::Lpm,
                        MatchKind::Range => T::Range,
                        MatchKind::Optional => T::Optional,
                        _ => T::Exact,
                    };
                    cfg::MatchField {
                        id: i as u32 + 1,
                        name: v.field_name(i).to_string(),
                        bitwidth: *w as i32,
                        r#match: Some(cfg::match_field::Match::MatchType(kind as i32)),
                        ..Default::default()
                    }
                })
                .collect(),
            size: v.size as i32,
        });
    }
    for r in &p.registers {
        let spec = cfg::P4DataTypeSpec {
            type_spec: Some(cfg::p4_data_type_spec::TypeSpec::Bitstring(
                cfg::P4BitstringLikeTypeSpec {
                    type_spec: Some(cfg::p4_bitstring_like_type_spec::TypeSpec::Bit(
                        cfg::P4BitTypeSpec {
                            bitwidth: r.width as i32,
                        },
                    )),
                    ..Default::default()
                },
            )),
        };
        info.registers.push(cfg::Register {
            preamble: Some(pre(r.id, &r.name)),
            type_spec: Some(spec),
            size: r.size as i32,
            ..Default::default()
        });
    }
    let objs: Vec<&p4sec_ir::ExternInstance> =
        p.externs.iter().filter(|e| e.type_name != e.name).collect();
    let mut types: Vec<&str> = objs.iter().map(|e| e.type_name.as_str()).collect();
    types.sort();
    types.dedup();
    for ty in types {
        info.externs.push(cfg::Extern {
            extern_type_id: extern_type_id(ty),
            extern_type_name: ty.into(),
            instances: objs
                .iter()
                .filter(|e| e.type_name == ty)
                .map(|e| cfg::ExternInstance {
                    preamble: Some(pre(extern_id(&e.name), &e.name)),
                    info: None,
                })
                .collect(),
        });
    }
    for d in &p.digests {
        let spec = cfg::P4DataTypeSpec {
            type_spec: Some(cfg::p4_data_type_spec::TypeSpec::Struct(cfg::P4NamedType {
                name: d.name.clone(),
            })),
        };
        info.digests.push(cfg::Digest {
            preamble: Some(pre(d.id, &d.name)),
            type_spec: Some(spec),
        });
    }
    apply_meta(p, &mut info);
    info
}

/// What the P4Info holds beyond names and ids (annotations, type info, left-out objects, initial
/// default actions), applied to the message.
fn apply_meta(p: &Program, info: &mut cfg::P4Info) {
    use std::collections::HashSet;
    let meta = &p.p4info;
    let table_out = |t: &p4sec_ir::Table| {
        meta.unused_tables.contains(&t.name) || meta.hidden(&format!("table {}", t.name))
    };
    let mut by_tables = HashSet::new();
    let mut by_kept = HashSet::new();
    let mut out_ids = HashSet::new();
    for t in &p.tables {
        if table_out(t) {
            out_ids.insert(t.id);
        }
        for ta in &t.actions {
            by_tables.insert(p.actions[ta.action as usize].id);
            if !table_out(t) {
                by_kept.insert(p.actions[ta.action as usize].id);
            }
        }
    }
    let annos_into = |key: &str,
                      annotations: &mut Vec<String>,
                      structured: &mut Vec<cfg::StructuredAnnotation>,
                      doc: Option<&mut Option<cfg::Documentation>>| {
        let Some(a) = meta.get(key) else { return };
        annotations.extend(
            a.annotations
                .iter()
                .filter(|s| !s.starts_with("@max_group_size("))
                .cloned(),
        );
        for sa in &a.structured {
            let val = |v: &p4sec_ir::p4info::AnnoValue| {
                use cfg::expression::Value;
                let v = match v {
                    p4sec_ir::p4info::AnnoValue::Str(s) => Value::StringValue(s.clone()),
                    p4sec_ir::p4info::AnnoValue::Int(i) => Value::Int64Value(*i),
                    p4sec_ir::p4info::AnnoValue::Bool(b) => Value::BoolValue(*b),
                };
                cfg::Expression { value: Some(v) }
            };
            let body = if sa.kv {
                cfg::structured_annotation::Body::KvPairList(cfg::KeyValuePairList {
                    kv_pairs: sa
                        .items
                        .iter()
                        .map(|(k, v)| cfg::KeyValuePair {
                            key: k.clone(),
                            value: Some(val(v)),
                        })
                        .collect(),
                })
            } else {
                cfg::structured_annotation::Body::ExpressionList(cfg::ExpressionList {
                    expressions: sa.items.iter().map(|(_, v)| val(v)).collect(),
                })
            };
            structured.push(cfg::StructuredAnnotation {
                name: sa.name.clone(),
                body: Some(body),
                ..Default::default()
            });
        }
        if let Some(d) = doc {
            if a.brief.is_some() || a.description.is_some() {
                *d = Some(cfg::Documentation {
                    brief: a.brief.clone().unwrap_or_default(),
                    description: a.description.clone().unwrap_or_default(),
                });
            }
        }
    };
    let pre_annos = |kind: &str, pre: &mut Option<cfg::Preamble>| {
        if let Some(pr) = pre.as_mut() {
            annos_into(
                &format!("{kind} {}", pr.name),
                &mut pr.annotations,
                &mut pr.structured_annotations,
                Some(&mut pr.doc),
            );
        }
    };
    let type_name = |key: &str| {
        meta.type_names
            .get(key)
            .map(|n| cfg::P4NamedType { name: n.clone() })
    };
    info.tables
        .retain(|t| !out_ids.contains(&t.preamble.as_ref().map(|x| x.id).unwrap_or(0)));
    for t in info.tables.iter_mut() {
        pre_annos("table", &mut t.preamble);
        let tname = t
            .preamble
            .as_ref()
            .map(|x| x.name.clone())
            .unwrap_or_default();
        for m in t.match_fields.iter_mut() {
            if m.r#match == Some(cfg::match_field::Match::OtherMatchType("optional".into())) {
                m.r#match = Some(cfg::match_field::Match::MatchType(
                    cfg::match_field::MatchType::Optional as i32,
                ));
            }
            let key = format!("key {tname} {}", m.id);
            m.type_name = type_name(&key);
            annos_into(
                &key,
                &mut m.annotations,
                &mut m.structured_annotations,
                Some(&mut m.doc),
            );
        }
        for r in t.action_refs.iter_mut() {
            annos_into(
                &format!("ref {tname} {}", r.id),
                &mut r.annotations,
                &mut r.structured_annotations,
                None,
            );
        }
        if let Some(pt) = p.tables.iter().find(|x| x.name == tname) {
            let da = &pt.default_action;
            let act = &p.actions[da.action as usize];
            t.initial_default_action = Some(cfg::TableActionCall {
                action_id: act.id,
                arguments: act
                    .params
                    .iter()
                    .zip(&da.args)
                    .map(|(prm, v)| cfg::table_action_call::Argument {
                        param_id: prm.id,
                        value: canonical(v),
                    })
                    .collect(),
            });
            t.has_initial_entries = !pt.entries.is_empty();
        }
    }
    info.actions.retain(|a| {
        let pr = a.preamble.as_ref().expect("preamble");
        // (an action of tables only that none of the kept tables has goes with them)
        !meta.hidden(&format!("action {}", pr.name))
            && (!by_tables.contains(&pr.id) || by_kept.contains(&pr.id))
    });
    for a in info.actions.iter_mut() {
        pre_annos("action", &mut a.preamble);
        let (aid, aname) = a
            .preamble
            .as_ref()
            .map(|x| (x.id, x.name.clone()))
            .unwrap_or_default();
        if !by_tables.contains(&aid) {
            a.params.clear();
        }
        for prm in a.params.iter_mut() {
            let key = format!("param {aname} {}", prm.id);
            prm.type_name = type_name(&key);
            annos_into(
                &key,
                &mut prm.annotations,
                &mut prm.structured_annotations,
                Some(&mut prm.doc),
            );
        }
    }
    info.action_profiles
        .retain(|ap| ap.table_ids.is_empty() || !ap.table_ids.iter().all(|t| out_ids.contains(t)));
    for ap in info.action_profiles.iter_mut() {
        let name = ap
            .preamble
            .as_ref()
            .map(|x| x.name.clone())
            .unwrap_or_default();
        if let Some(m) = meta.int_anno(&format!("action_profile {name}"), "max_group_size") {
            ap.max_group_size = m as i32;
        }
        pre_annos("action_profile", &mut ap.preamble);
    }
    info.direct_counters
        .retain(|c| !out_ids.contains(&c.direct_table_id));
    info.direct_meters
        .retain(|m| !out_ids.contains(&m.direct_table_id));
    for c in info.counters.iter_mut() {
        pre_annos("counter", &mut c.preamble);
    }
    for c in info.direct_counters.iter_mut() {
        pre_annos("direct_counter", &mut c.preamble);
    }
    for m in info.meters.iter_mut() {
        pre_annos("meter", &mut m.preamble);
    }
    for m in info.direct_meters.iter_mut() {
        pre_annos("direct_meter", &mut m.preamble);
    }
    for r in info.registers.iter_mut() {
        pre_annos("register", &mut r.preamble);
    }
    for v in info.value_sets.iter_mut() {
        pre_annos("value_set", &mut v.preamble);
    }
    for d in info.digests.iter_mut() {
        pre_annos("digest", &mut d.preamble);
    }
    for ch in info.controller_packet_metadata.iter_mut() {
        pre_annos("ctrl", &mut ch.preamble);
        let name = ch
            .preamble
            .as_ref()
            .map(|x| x.name.clone())
            .unwrap_or_default();
        for f in ch.metadata.iter_mut() {
            let key = format!("ctrl_field {name} {}", f.id);
            f.type_name = type_name(&key);
            annos_into(
                &key,
                &mut f.annotations,
                &mut f.structured_annotations,
                None,
            );
        }
    }
    if let Some(pk) = info.pkg_info.as_mut() {
        for (k, v) in &meta.pkg_info {
            match k.as_str() {
                "name" => pk.name = v.clone(),
                "version" => pk.version = v.clone(),
                "organization" => pk.organization = v.clone(),
                "contact" => pk.contact = v.clone(),
                "url" => pk.url = v.clone(),
                _ => {}
            }
        }
    }
    let type_info = meta.type_specs
        || !p.tables.is_empty()
        || !p.registers.is_empty()
        || !p.digests.is_empty()
        || !meta.serializable_enums.is_empty()
        || !meta.new_types.is_empty();
    if type_info {
        let bit = |w: u32| cfg::P4DataTypeSpec {
            type_spec: Some(cfg::p4_data_type_spec::TypeSpec::Bitstring(
                cfg::P4BitstringLikeTypeSpec {
                    type_spec: Some(cfg::p4_bitstring_like_type_spec::TypeSpec::Bit(
                        cfg::P4BitTypeSpec { bitwidth: w as i32 },
                    )),
                    ..Default::default()
                },
            )),
        };
        let mut ti = cfg::P4TypeInfo::default();
        for d in &p.digests {
            ti.structs.insert(
                d.name.clone(),
                cfg::P4StructTypeSpec {
                    members: d
                        .fields
                        .iter()
                        .map(|(n, w)| cfg::p4_struct_type_spec::Member {
                            name: n.clone(),
                            type_spec: Some(bit(*w)),
                        })
                        .collect(),
                    ..Default::default()
                },
            );
        }
        for (name, (w, members)) in &meta.serializable_enums {
            ti.serializable_enums.insert(
                name.clone(),
                cfg::P4SerializableEnumTypeSpec {
                    underlying_type: Some(cfg::P4BitTypeSpec {
                        bitwidth: *w as i32,
                    }),
                    members: members
                        .iter()
                        .map(|(n, v)| cfg::p4_serializable_enum_type_spec::Member {
                            name: n.clone(),
                            value: v.clone(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
            );
        }
        for (name, (w, annos)) in &meta.new_types {
            // a translated type is described by its translation (and its annotation is not
            // repeated), as the reference compiler writes it
            let (representation, annotations) = match translation_of(annos) {
                Some((uri, sdn)) => {
                    use cfg::p4_new_type_translation::{SdnString, SdnType as T};
                    let sdn_type = match sdn {
                        SdnType::Str => T::SdnString(SdnString {}),
                        SdnType::Bits(b) => T::SdnBitwidth(b as i32),
                    };
                    let others = annos
                        .iter()
                        .filter(|a| !a.starts_with("@p4runtime_translation("))
                        .cloned()
                        .collect();
                    (
                        cfg::p4_new_type_spec::Representation::TranslatedType(
                            cfg::P4NewTypeTranslation {
                                uri,
                                sdn_type: Some(sdn_type),
                            },
                        ),
                        others,
                    )
                }
                None => (
                    cfg::p4_new_type_spec::Representation::OriginalType(bit(*w)),
                    annos.clone(),
                ),
            };
            ti.new_types.insert(
                name.clone(),
                cfg::P4NewTypeSpec {
                    annotations,
                    representation: Some(representation),
                    ..Default::default()
                },
            );
        }
        info.type_info = Some(ti);
    }
}

/// A value as a P4Runtime canonical byte string (no leading zero bytes; zero is one zero byte).
fn canonical(v: &p4sec_ir::Value) -> Vec<u8> {
    let mut bytes: Vec<u8> = v.words.iter().rev().flat_map(|w| w.to_be_bytes()).collect();
    while bytes.len() > 1 && bytes[0] == 0 {
        bytes.remove(0);
    }
    if bytes.is_empty() {
        bytes.push(0);
    }
    bytes
}

#[cfg(test)]
mod tests;
