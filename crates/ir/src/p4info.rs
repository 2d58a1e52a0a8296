//! P4Info (schema `p4.config.v1.P4Info`) for a compiled program, with the reference compiler's
//! naming and id rules: ids are `prefix << 24 | jenkins_one_at_a_time(name) & 0xffffff`; aliases
//! are the shortest dotted suffix of the name that is unique among the program's objects.

pub use crate::p4info_meta::{AnnoValue, Annos, P4InfoMeta, StructuredAnno};
use crate::{CounterUnit, MatchKind, Program};
use std::collections::HashMap;
use std::fmt::Write;

/// A value as a P4Runtime canonical byte string (no leading zero bytes; zero is one zero byte),
/// escaped for the text format.
fn canonical_bytes(v: &crate::Value) -> String {
    let mut bytes: Vec<u8> = v.words.iter().rev().flat_map(|w| w.to_be_bytes()).collect();
    while bytes.len() > 1 && bytes[0] == 0 {
        bytes.remove(0);
    }
    if bytes.is_empty() {
        bytes.push(0);
    }
    bytes.iter().map(|b| format!("\\{b:03o}")).collect()
}

fn anno_value(v: &AnnoValue) -> String {
    match v {
        AnnoValue::Str(s) => format!("string_value: {}", quote(s)),
        AnnoValue::Int(i) => format!("int64_value: {i}"),
        AnnoValue::Bool(b) => format!("bool_value: {b}"),
    }
}

fn write_type_name(o: &mut String, meta: &P4InfoMeta, key: &str) {
    if let Some(n) = meta.type_names.get(key) {
        let _ = writeln!(o, "    type_name {{\n      name: {}\n    }}", quote(n));
    }
}

/// The annotation fields of an object (indented by `ind`), for a preamble or a field message.
fn write_annos(o: &mut String, a: Option<&Annos>, ind: &str) {
    let Some(a) = a else { return };
    // `@max_group_size` becomes the action profile's field of that name
    for s in a
        .annotations
        .iter()
        .filter(|s| !s.starts_with("@max_group_size("))
    {
        let _ = writeln!(o, "{ind}annotations: {}", quote(s));
    }
    if a.brief.is_some() || a.description.is_some() {
        let _ = writeln!(o, "{ind}doc {{");
        if let Some(b) = &a.brief {
            let _ = writeln!(o, "{ind}  brief: {}", quote(b));
        }
        if let Some(d) = &a.description {
            let _ = writeln!(o, "{ind}  description: {}", quote(d));
        }
        let _ = writeln!(o, "{ind}}}");
    }
    for sa in &a.structured {
        let _ = writeln!(
            o,
            "{ind}structured_annotations {{\n{ind}  name: {}",
            quote(&sa.name)
        );
        if sa.kv {
            let _ = writeln!(o, "{ind}  kv_pair_list {{");
            for (k, v) in &sa.items {
                let _ = writeln!(
                    o,
                    "{ind}    kv_pairs {{\n{ind}      key: {}\n{ind}      value {{\n{ind}        {}\n{ind}      }}\n{ind}    }}",
                    quote(k),
                    anno_value(v)
                );
            }
        } else {
            let _ = writeln!(o, "{ind}  expression_list {{");
            for (_, v) in &sa.items {
                let _ = writeln!(
                    o,
                    "{ind}    expressions {{\n{ind}      {}\n{ind}    }}",
                    anno_value(v)
                );
            }
        }
        let _ = writeln!(o, "{ind}  }}\n{ind}}}");
    }
}

/// Bob Jenkins' one-at-a-time hash (the reference compiler's P4Info id hash).
pub fn jenkins_one_at_a_time(data: &[u8]) -> u32 {
    let mut h: u32 = 0;
    for &b in data {
        h = h.wrapping_add(b as u32);
        h = h.wrapping_add(h << 10);
        h ^= h >> 6;
    }
    h = h.wrapping_add(h << 3);
    h ^= h >> 11;
    h.wrapping_add(h << 15)
}

/// P4Runtime entity id prefixes (P4Runtime specification, "P4Ids").
pub mod prefix {
    pub const ACTION: u8 = 0x01;
    pub const TABLE: u8 = 0x02;
    pub const VALUE_SET: u8 = 0x03;
    pub const CONTROLLER_HEADER: u8 = 0x04;
    pub const ACTION_PROFILE: u8 = 0x11;
    pub const COUNTER: u8 = 0x12;
    pub const DIRECT_COUNTER: u8 = 0x13;
    pub const METER: u8 = 0x14;
    pub const DIRECT_METER: u8 = 0x15;
    pub const REGISTER: u8 = 0x16;
    pub const DIGEST: u8 = 0x17;
    /// p4sec's own extern instances (the P4Runtime range for architecture-specific externs starts
    /// at 0x80).
    pub const P4SEC_EXTERN: u8 = 0x81;
}

/// P4Runtime id of an extern instance of p4sec (`ExternEntry.extern_id`).
pub fn extern_id(name: &str) -> u32 {
    ((prefix::P4SEC_EXTERN as u32) << 24) | (jenkins_one_at_a_time(name.as_bytes()) & 0xff_ffff)
}

/// P4Runtime id of a p4sec extern type (`ExternEntry.extern_type_id`).
pub fn extern_type_id(type_name: &str) -> u32 {
    0x8000_0000 | (jenkins_one_at_a_time(type_name.as_bytes()) & 0xffff)
}

/// Shortest unique dotted suffixes for a set of names.
pub fn aliases(names: &[&str]) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for n in names {
        let parts: Vec<&str> = n.split('.').collect();
        let mut alias = n.to_string();
        for k in 1..=parts.len() {
            let cand = parts[parts.len() - k..].join(".");
            let clash = names
                .iter()
                .filter(|m| **m != *n)
                .any(|m| *m == cand || m.ends_with(&format!(".{cand}")));
            if !clash {
                alias = cand;
                break;
            }
        }
        out.insert(n.to_string(), alias);
    }
    out
}

fn quote(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            _ => o.push(c),
        }
    }
    o.push('"');
    o
}

fn unit(u: CounterUnit) -> &'static str {
    match u {
        CounterUnit::Packets => "PACKETS",
        CounterUnit::Bytes => "BYTES",
        CounterUnit::Both => "BOTH",
    }
}

/// Aliases of every named P4Info object of `p` (tables, actions, profiles, counters, meters,
/// registers, value sets, digests).
pub fn program_aliases(p: &Program) -> HashMap<String, String> {
    let mut names: Vec<&str> = vec![];
    names.extend(p.tables.iter().map(|t| t.name.as_str()));
    let mut seen_actions = std::collections::HashSet::new();
    for a in &p.actions {
        if seen_actions.insert(a.id) {
            names.push(a.name.as_str());
        }
    }
    names.extend(p.action_profiles.iter().map(|x| x.name.as_str()));
    names.extend(p.counters.iter().map(|x| x.name.as_str()));
    names.extend(p.direct_counters.iter().map(|x| x.name.as_str()));
    names.extend(p.meters.iter().map(|x| x.name.as_str()));
    names.extend(p.direct_meters.iter().map(|x| x.name.as_str()));
    names.extend(p.registers.iter().map(|x| x.name.as_str()));
    names.extend(p.value_sets.iter().map(|x| x.name.as_str()));
    names.extend(p.digests.iter().map(|x| x.name.as_str()));
    aliases(&names)
}

/// The P4Info of `p` in protobuf text format.
pub fn to_text(p: &Program) -> String {
    let al = program_aliases(p);
    let alias = |n: &str| al.get(n).cloned().unwrap_or_else(|| n.to_string());
    let mut o = String::new();
    o.push_str("# proto-file: p4/config/v1/p4info.proto\n# proto-message: p4.config.v1.P4Info\n\n");
    o.push_str("pkg_info {\n");
    for (k, v) in &p.p4info.pkg_info {
        let _ = writeln!(o, "  {k}: {}", quote(v));
    }
    o.push_str("  arch: \"v1model\"\n}\n");
    let meta = &p.p4info;
    // what the reference compiler leaves out: unused tables, then actions only they refer to, and
    // their direct resources and profiles
    let table_out = |t: &crate::Table| {
        meta.unused_tables.contains(&t.name) || meta.hidden(&format!("table {}", t.name))
    };
    let mut by_tables = std::collections::HashSet::new();
    let mut by_kept = std::collections::HashSet::new();
    for t in &p.tables {
        for ta in &t.actions {
            by_tables.insert(p.actions[ta.action as usize].id);
            if !table_out(t) {
                by_kept.insert(p.actions[ta.action as usize].id);
            }
        }
    }
    let action_out = |a: &crate::Action| {
        meta.hidden(&format!("action {}", a.name))
            || (by_tables.contains(&a.id) && !by_kept.contains(&a.id))
    };
    let res_out = |t: Option<u32>| t.is_some_and(|t| table_out(&p.tables[t as usize]));
    let preamble_kind = |o: &mut String, kind: &str, id: u32, name: &str| {
        let _ = writeln!(
            o,
            "  preamble {{\n    id: {id}\n    name: {}\n    alias: {}",
            quote(name),
            quote(&alias(name))
        );
        write_annos(o, meta.get(&format!("{kind} {name}")), "    ");
        o.push_str("  }\n");
    };
    for t in &p.tables {
        if table_out(t) {
            continue;
        }
        o.push_str("tables {\n");
        preamble_kind(&mut o, "table", t.id, &t.name);
        for k in t.keys.iter().filter(|k| k.kind != MatchKind::Selector) {
            let mt = match k.kind {
                MatchKind::Exact => "match_type: EXACT",
                MatchKind::Ternary => "match_type: TERNARY",
                MatchKind::Lpm => "match_type: LPM",
                MatchKind::Range => "match_type: RANGE",
                MatchKind::Optional => "match_type: OPTIONAL",
                MatchKind::Selector => "",
            };
            let _ = writeln!(
                o,
                "  match_fields {{\n    id: {}\n    name: {}\n    bitwidth: {}\n    {mt}",
                k.id,
                quote(&k.name),
                k.width
            );
            write_type_name(&mut o, meta, &format!("key {} {}", t.name, k.id));
            write_annos(
                &mut o,
                meta.get(&format!("key {} {}", t.name, k.id)),
                "    ",
            );
            o.push_str("  }\n");
        }
        for ta in &t.actions {
            let a = &p.actions[ta.action as usize];
            let scope = if ta.default_only {
                "\n    scope: DEFAULT_ONLY"
            } else if ta.table_only {
                "\n    scope: TABLE_ONLY"
            } else {
                ""
            };
            let _ = writeln!(o, "  action_refs {{\n    id: {}{scope}", a.id);
            write_annos(
                &mut o,
                meta.get(&format!("ref {} {}", t.name, a.id)),
                "    ",
            );
            o.push_str("  }\n");
        }
        if t.default_is_const {
            let _ = writeln!(
                o,
                "  const_default_action_id: {}",
                p.actions[t.default_action.action as usize].id
            );
        }
        match t.implementation {
            crate::Implementation::ActionProfile(i) | crate::Implementation::ActionSelector(i) => {
                let _ = writeln!(
                    o,
                    "  implementation_id: {}",
                    p.action_profiles[i as usize].id
                );
            }
            crate::Implementation::None => {}
        }
        if let Some(c) = t.direct_counter {
            let _ = writeln!(
                o,
                "  direct_resource_ids: {}",
                p.direct_counters[c as usize].id
            );
        }
        if let Some(m) = t.direct_meter {
            let _ = writeln!(
                o,
                "  direct_resource_ids: {}",
                p.direct_meters[m as usize].id
            );
        }
        let _ = writeln!(o, "  size: {}", t.size);
        let da = &t.default_action;
        let _ = writeln!(
            o,
            "  initial_default_action {{\n    action_id: {}",
            p.actions[da.action as usize].id
        );
        for (prm, v) in p.actions[da.action as usize].params.iter().zip(&da.args) {
            let _ = writeln!(
                o,
                "    arguments {{\n      param_id: {}\n      value: \"{}\"\n    }}",
                prm.id,
                canonical_bytes(v)
            );
        }
        o.push_str("  }\n");
        if t.support_timeout {
            o.push_str("  idle_timeout_behavior: NOTIFY_CONTROL\n");
        }
        if t.entries_are_const {
            o.push_str("  is_const_table: true\n");
        }
        if !t.entries.is_empty() {
            o.push_str("  has_initial_entries: true\n");
        }
        o.push_str("}\n");
    }
    let mut done = std::collections::HashSet::new();
    for a in &p.actions {
        if !done.insert(a.id) || action_out(a) {
            continue;
        }
        o.push_str("actions {\n");
        preamble_kind(&mut o, "action", a.id, &a.name);
        // an action only called directly (the reference compiler turns the call into a hidden table
        // that binds every argument) is listed without parameters
        let direct_only = !by_tables.contains(&a.id);
        for prm in a.params.iter().filter(|_| !direct_only) {
            let _ = writeln!(
                o,
                "  params {{\n    id: {}\n    name: {}\n    bitwidth: {}",
                prm.id,
                quote(&prm.name),
                prm.loc.width
            );
            write_type_name(&mut o, meta, &format!("param {} {}", a.name, prm.id));
            write_annos(
                &mut o,
                meta.get(&format!("param {} {}", a.name, prm.id)),
                "    ",
            );
            o.push_str("  }\n");
        }
        o.push_str("}\n");
    }
    for ap in &p.action_profiles {
        if !ap.tables.is_empty() && ap.tables.iter().all(|t| table_out(&p.tables[*t as usize])) {
            continue;
        }
        o.push_str("action_profiles {\n");
        preamble_kind(&mut o, "action_profile", ap.id, &ap.name);
        for t in &ap.tables {
            let _ = writeln!(o, "  table_ids: {}", p.tables[*t as usize].id);
        }
        if ap.selector.is_some() {
            o.push_str("  with_selector: true\n");
        }
        let _ = writeln!(o, "  size: {}", ap.size);
        if let Some(m) = meta.int_anno(&format!("action_profile {}", ap.name), "max_group_size") {
            let _ = writeln!(o, "  max_group_size: {m}");
        }
        o.push_str("}\n");
    }
    for c in &p.counters {
        o.push_str("counters {\n");
        preamble_kind(&mut o, "counter", c.id, &c.name);
        let _ = writeln!(
            o,
            "  spec {{\n    unit: {}\n  }}\n  size: {}",
            unit(c.unit),
            c.size
        );
        o.push_str("}\n");
    }
    for c in &p.direct_counters {
        if res_out(c.table) {
            continue;
        }
        o.push_str("direct_counters {\n");
        preamble_kind(&mut o, "direct_counter", c.id, &c.name);
        let _ = writeln!(o, "  spec {{\n    unit: {}\n  }}", unit(c.unit));
        if let Some(t) = c.table {
            let _ = writeln!(o, "  direct_table_id: {}", p.tables[t as usize].id);
        }
        o.push_str("}\n");
    }
    for m in &p.meters {
        o.push_str("meters {\n");
        preamble_kind(&mut o, "meter", m.id, &m.name);
        let _ = writeln!(
            o,
            "  spec {{\n    unit: {}\n  }}\n  size: {}",
            unit(m.unit),
            m.size
        );
        o.push_str("}\n");
    }
    for m in &p.direct_meters {
        if res_out(m.table) {
            continue;
        }
        o.push_str("direct_meters {\n");
        preamble_kind(&mut o, "direct_meter", m.id, &m.name);
        let _ = writeln!(o, "  spec {{\n    unit: {}\n  }}", unit(m.unit));
        if let Some(t) = m.table {
            let _ = writeln!(o, "  direct_table_id: {}", p.tables[t as usize].id);
        }
        o.push_str("}\n");
    }
    for ch in &p.controller_headers {
        o.push_str("controller_packet_metadata {\n");
        let _ = writeln!(
            o,
            "  preamble {{\n    id: {}\n    name: {}\n    alias: {}",
            ch.id,
            quote(&ch.name),
            quote(&ch.name)
        );
        write_annos(&mut o, meta.get(&format!("ctrl {}", ch.name)), "    ");
        o.push_str("  }\n");
        for (n, id, w) in &ch.fields {
            let _ = writeln!(
                o,
                "  metadata {{\n    id: {id}\n    name: {}\n    bitwidth: {w}",
                quote(n)
            );
            write_type_name(&mut o, meta, &format!("ctrl_field {} {id}", ch.name));
            write_annos(
                &mut o,
                meta.get(&format!("ctrl_field {} {id}", ch.name)),
                "    ",
            );
            o.push_str("  }\n");
        }
        o.push_str("}\n");
    }
    for v in &p.value_sets {
        o.push_str("value_sets {\n");
        preamble_kind(&mut o, "value_set", v.id, &v.name);
        for (i, w) in v.widths.iter().enumerate() {
            let name = v.field_name(i);
            let name = if name.is_empty() {
                String::new()
            } else {
                format!("    name: {}\n", quote(name))
            };
            let kind = match v.kind(i) {
                crate::MatchKind::Ternary => "TERNARY",
                crate::MatchKind::Lpm => "LPM",
                crate::MatchKind::Range => "RANGE",
                crate::MatchKind::Optional => "OPTIONAL",
                _ => "EXACT",
            };
            let _ = writeln!(
                o,
                "  match {{\n    id: {}\n{name}    bitwidth: {w}\n    match_type: {kind}\n  }}",
                i + 1
            );
        }
        let _ = writeln!(o, "  size: {}", v.size);
        o.push_str("}\n");
    }
    for r in &p.registers {
        o.push_str("registers {\n");
        preamble_kind(&mut o, "register", r.id, &r.name);
        let _ = writeln!(o, "  type_spec {{\n    bitstring {{\n      bit {{\n        bitwidth: {}\n      }}\n    }}\n  }}\n  size: {}", r.width, r.size);
        o.push_str("}\n");
    }
    // extern object instances (e.g. esp_sad) reachable through P4Runtime ExternEntry
    let objs: Vec<&crate::ExternInstance> =
        p.externs.iter().filter(|e| e.type_name != e.name).collect();
    let mut types: Vec<&str> = objs.iter().map(|e| e.type_name.as_str()).collect();
    types.sort();
    types.dedup();
    for ty in types {
        let _ = writeln!(
            o,
            "externs {{\n  extern_type_id: {}\n  extern_type_name: {}",
            extern_type_id(ty),
            quote(ty)
        );
        for e in objs.iter().filter(|e| e.type_name == ty) {
            let _ = writeln!(
                o,
                "  instances {{\n    preamble {{\n      id: {}\n      name: {}\n      alias: {}\n    }}\n  }}",
                extern_id(&e.name),
                quote(&e.name),
                quote(&alias(&e.name))
            );
        }
        o.push_str("}\n");
    }
    for d in &p.digests {
        o.push_str("digests {\n");
        preamble_kind(&mut o, "digest", d.id, &d.name);
        o.push_str("  type_spec {\n    struct {\n      name: ");
        o.push_str(&quote(&d.name));
        o.push_str("\n    }\n  }\n}\n");
    }
    let type_info = meta.type_specs
        || !p.tables.is_empty()
        || !p.registers.is_empty()
        || !p.digests.is_empty()
        || !meta.serializable_enums.is_empty()
        || !meta.new_types.is_empty();
    if !type_info {
        return o;
    }
    o.push_str("type_info {\n");
    for (name, (w, annos)) in &meta.new_types {
        let _ = writeln!(o, "  new_types {{\n    key: {}\n    value {{", quote(name));
        // a translated type is described by its translation (its annotation is not repeated), as
        // the reference compiler writes it
        let translation = crate::p4info_meta::translation_of(annos);
        match &translation {
            Some((uri, crate::p4info_meta::SdnType::Str)) => {
                let _ = writeln!(o, "      translated_type {{\n        uri: {}\n        sdn_string {{\n        }}\n      }}", quote(uri));
            }
            Some((uri, crate::p4info_meta::SdnType::Bits(b))) => {
                let _ = writeln!(o, "      translated_type {{\n        uri: {}\n        sdn_bitwidth: {b}\n      }}", quote(uri));
            }
            None => {
                let _ = writeln!(
                    o,
                    "      original_type {{\n        bitstring {{\n          bit {{\n            bitwidth: {w}\n          }}\n        }}\n      }}"
                );
            }
        }
        for a in annos
            .iter()
            .filter(|a| translation.is_none() || !a.starts_with("@p4runtime_translation("))
        {
            let _ = writeln!(o, "      annotations: {}", quote(a));
        }
        o.push_str("    }\n  }\n");
    }
    for d in &p.digests {
        let _ = writeln!(o, "  structs {{\n    key: {}\n    value {{", quote(&d.name));
        for (n, w) in &d.fields {
            let _ = writeln!(o, "      members {{\n        name: {}\n        type_spec {{\n          bitstring {{\n            bit {{\n              bitwidth: {w}\n            }}\n          }}\n        }}\n      }}", quote(n));
        }
        o.push_str("    }\n  }\n");
    }
    for (name, (w, members)) in &meta.serializable_enums {
        let _ = writeln!(o, "  serializable_enums {{\n    key: {}\n    value {{\n      underlying_type {{\n        bitwidth: {w}\n      }}", quote(name));
        for (m, v) in members {
            let bytes: String = v.iter().map(|b| format!("\\{b:03o}")).collect();
            let _ = writeln!(
                o,
                "      members {{\n        name: {}\n        value: \"{bytes}\"\n      }}",
                quote(m)
            );
        }
        o.push_str("    }\n  }\n");
    }
    o.push_str("}\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_ids() {
        // ids from the reference compiler's P4Info for flag_lost-bmv2
        assert_eq!(
            0x0100_0000 | jenkins_one_at_a_time(b"NoAction") & 0xff_ffff,
            21257015
        );
        assert_eq!(
            0x0200_0000 | jenkins_one_at_a_time(b"ingress.ipv4_lpm") & 0xff_ffff,
            43030458
        );
    }

    #[test]
    fn alias_is_shortest_unique_suffix() {
        let a = aliases(&["ingress.t", "egress.t", "ingress.u", "NoAction"]);
        assert_eq!(a["ingress.t"], "ingress.t");
        assert_eq!(a["ingress.u"], "u");
        assert_eq!(a["NoAction"], "NoAction");
    }
}
