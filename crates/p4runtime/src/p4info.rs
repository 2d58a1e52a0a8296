//! The P4Info of a compiled program as the protobuf message (`p4.config.v1.P4Info`), for `p4info.binpb` and
//! for the switch's `--program` start-up. It mirrors `p4sec_ir::p4info::to_text` (ids, names, aliases);
//! `tests/compiler/test_p4info.py` checks that the two encodings hold the same message.

use crate::proto::p4::config::v1 as cfg;
use p4sec_ir::p4info::{extern_id, extern_type_id, program_aliases};
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
    let pre = |id: u32, name: &str| cfg::Preamble { id, name: name.into(), alias: al.get(name).cloned().unwrap_or_else(|| name.into()), ..Default::default() };
    let mut info = cfg::P4Info { pkg_info: Some(cfg::PkgInfo { arch: "v1model".into(), ..Default::default() }), ..Default::default() };
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
                cfg::MatchField { id: k.id, name: k.name.clone(), bitwidth: k.width as i32, r#match: Some(m), ..Default::default() }
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
                cfg::ActionRef { id: p.actions[ta.action as usize].id, scope: scope as i32, ..Default::default() }
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
            const_default_action_id: if t.default_is_const { p.actions[t.default_action.action as usize].id } else { 0 },
            implementation_id: match t.implementation {
                Implementation::ActionProfile(i) | Implementation::ActionSelector(i) => p.action_profiles[i as usize].id,
                Implementation::None => 0,
            },
            direct_resource_ids: direct,
            size: t.size as i64,
            idle_timeout_behavior: if t.support_timeout { cfg::table::IdleTimeoutBehavior::NotifyControl as i32 } else { 0 },
            is_const_table: t.entries_are_const,
            ..Default::default()
        });
    }
    let mut done = std::collections::HashSet::new();
    for a in &p.actions {
        if !done.insert(a.id) {
            continue;
        }
        let params =
            a.params.iter().map(|x| cfg::action::Param { id: x.id, name: x.name.clone(), bitwidth: x.loc.width as i32, ..Default::default() }).collect();
        info.actions.push(cfg::Action { preamble: Some(pre(a.id, &a.name)), params });
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
            spec: Some(cfg::MeterSpec { unit: meter_unit(m.unit), ..Default::default() }),
            size: m.size as i64,
            ..Default::default()
        });
    }
    for m in &p.direct_meters {
        info.direct_meters.push(cfg::DirectMeter {
            preamble: Some(pre(m.id, &m.name)),
            spec: Some(cfg::MeterSpec { unit: meter_unit(m.unit), ..Default::default() }),
            direct_table_id: m.table.map(|t| p.tables[t as usize].id).unwrap_or(0),
        });
    }
    for ch in &p.controller_headers {
        info.controller_packet_metadata.push(cfg::ControllerPacketMetadata {
            preamble: Some(cfg::Preamble { id: ch.id, name: ch.name.clone(), alias: ch.name.clone(), ..Default::default() }),
            metadata: ch
                .fields
                .iter()
                .map(|(n, id, w)| cfg::controller_packet_metadata::Metadata { id: *id, name: n.clone(), bitwidth: *w as i32, ..Default::default() })
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
            type_spec: Some(cfg::p4_data_type_spec::TypeSpec::Bitstring(cfg::P4BitstringLikeTypeSpec {
                type_spec: Some(cfg::p4_bitstring_like_type_spec::TypeSpec::Bit(cfg::P4BitTypeSpec { bitwidth: r.width as i32 })),
                ..Default::default()
            })),
        };
        info.registers.push(cfg::Register { preamble: Some(pre(r.id, &r.name)), type_spec: Some(spec), size: r.size as i32, ..Default::default() });
    }
    let objs: Vec<&p4sec_ir::ExternInstance> = p.externs.iter().filter(|e| e.type_name != e.name).collect();
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
                .map(|e| cfg::ExternInstance { preamble: Some(pre(extern_id(&e.name), &e.name)), info: None })
                .collect(),
        });
    }
    for d in &p.digests {
        let spec = cfg::P4DataTypeSpec { type_spec: Some(cfg::p4_data_type_spec::TypeSpec::Struct(cfg::P4NamedType { name: d.name.clone() })) };
        info.digests.push(cfg::Digest { preamble: Some(pre(d.id, &d.name)), type_spec: Some(spec) });
    }
    info
}
