//! The reference compiler's P4Info naming and id rules, for the front end (which assigns ids) and
//! the P4Info builder (`p4sec_p4runtime::p4info`, the one place the P4Info message is built): ids
//! are `prefix << 24 | jenkins_one_at_a_time(name) & 0xffffff`; aliases are the shortest dotted
//! suffix of the name that is unique among the program's objects.

pub use crate::p4info_meta::{AnnoValue, Annos, P4InfoMeta, StructuredAnno};
use crate::Program;
use std::collections::HashMap;

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
