//! P4Runtime type translation (specification, "Translation of port numbers and other types"): match
//! fields, action parameters and packet-in/out metadata whose type is a `type bit<W> T` annotated
//! `@p4runtime_translation("uri", string)` or `(..., N)` are exchanged with the controller as SDN
//! values (a string's bytes, or an N-bit value) and stored as W-bit data-plane values. The mapping
//! of a type is, in this order: a map the switch was given for it (`p4sec switch --translate
//! T=FILE`, by type name or URI; unknown SDN values are refused); for port types (name or URI
//! containing "port") the port number itself (the decimal string for string types); otherwise an
//! automatic allocation: the first use of an SDN value in an INSERT or MODIFY takes the lowest free
//! data-plane value from 1 up (0 is left as "unset"), and a value is freed after a Write once no
//! table entry uses it any more.

use crate::codec::{bytes_to_value, value_to_bytes};
use crate::proto::p4::v1 as p4;
use p4sec_engine::Engine;
use p4sec_ir::p4info_meta::{parse_translation as parse_annotation, SdnType};
use p4sec_ir::{FieldMatch, Program};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use tonic::Status;

/// How the controller writes a translated type's values.
type Sdn = SdnType;

/// Maps given to the switch: type name or URI → (SDN string → data-plane value).
pub type Maps = HashMap<String, BTreeMap<String, u64>>;

/// `TYPE=FILE` of `p4sec switch --translate`: the type (name or URI) and the JSON object in FILE,
/// SDN string → data-plane value (a non-negative integer).
pub fn read_map(flag: &str) -> Result<(String, BTreeMap<String, u64>), String> {
    let (ty, file) = flag
        .split_once('=')
        .filter(|(t, f)| !t.is_empty() && !f.is_empty())
        .ok_or("expected TYPE=FILE")?;
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read {file}: {e}"))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{file}: not JSON: {e}"))?;
    let obj = v.as_object().ok_or_else(|| {
        format!("{file}: expected a JSON object {{\"SDN string\": data-plane value, ...}}")
    })?;
    let mut m = BTreeMap::new();
    let mut seen = HashMap::new();
    for (k, x) in obj {
        let n = x
            .as_u64()
            .ok_or_else(|| format!("{file}: `{k}` maps to {x}, not a non-negative integer"))?;
        if let Some(other) = seen.insert(n, k.clone()) {
            return Err(format!("{file}: `{other}` and `{k}` both map to {n}"));
        }
        m.insert(k.clone(), n);
    }
    Ok((ty.to_string(), m))
}

struct Type {
    name: String,
    sdn: Sdn,
    /// The data-plane width.
    width: u32,
    /// A fixed map (from the switch's configuration): SDN key → data-plane value.
    fixed: Option<HashMap<Vec<u8>, u64>>,
    port: bool,
}

#[derive(Default)]
struct Alloc {
    fwd: HashMap<Vec<u8>, u64>,
    rev: HashMap<u64, Vec<u8>>,
}

/// The translated fields of one pipeline and the automatic allocations of its types.
pub struct Translator {
    types: Vec<Type>,
    /// (table id, match field id) → type index.
    keys: HashMap<(u32, u32), usize>,
    /// (action id, param id) → type index.
    params: HashMap<(u32, u32), usize>,
    /// (`packet_in` / `packet_out`, metadata id) → type index.
    ctrl: HashMap<(String, u32), usize>,
    alloc: Mutex<Vec<Alloc>>,
    /// Held for a whole Write (translation, application, collection), so that a Write never frees a
    /// value another one has allocated and not installed yet.
    pub(crate) writing: Mutex<()>,
}

impl Translator {
    /// The translator of `prog`, or None when it has no translated type.
    pub fn new(prog: &Program, maps: &Maps) -> Result<Option<Translator>, String> {
        let meta = &prog.p4info;
        let mut types = vec![];
        let mut by_name = HashMap::new();
        for (name, (width, annos)) in &meta.new_types {
            let Some((uri, sdn)) = annos
                .iter()
                .find_map(|a| parse_annotation(a).transpose())
                .transpose()?
            else {
                continue;
            };
            let map = maps
                .get(name)
                .or_else(|| (!uri.is_empty()).then(|| maps.get(&uri)).flatten());
            let mut fixed = None;
            if let Some(m) = map {
                let mut f = HashMap::new();
                for (k, v) in m {
                    if *width < 64 && *v >> width != 0 {
                        return Err(format!("--translate {name}: `{k}` maps to {v}, wider than the type's {width} bits"));
                    }
                    let key = match sdn {
                        Sdn::Str => k.as_bytes().to_vec(),
                        Sdn::Bits(w) => {
                            let n: u128 = k.parse().map_err(|_| format!("--translate {name}: the SDN values of this type are {w}-bit numbers, not `{k}`"))?;
                            value_to_bytes(&p4sec_ir::Value {
                                width: w,
                                words: vec![n as u64, (n >> 64) as u64],
                            })
                        }
                    };
                    f.insert(key, *v);
                }
                fixed = Some(f);
            }
            let port = name.to_lowercase().contains("port") || uri.to_lowercase().contains("port");
            by_name.insert(name.clone(), types.len());
            types.push(Type {
                name: name.clone(),
                sdn,
                width: *width,
                fixed,
                port,
            });
        }
        if types.is_empty() {
            return Ok(None);
        }
        let mut keys = HashMap::new();
        let mut params = HashMap::new();
        let mut ctrl = HashMap::new();
        for (key, tn) in &meta.type_names {
            let Some(&ti) = by_name.get(tn) else { continue };
            let parts: Vec<&str> = key.split(' ').collect();
            let [kind, obj, id] = parts[..] else { continue };
            let Ok(id) = id.parse::<u32>() else { continue };
            match kind {
                "key" => {
                    if let Some(t) = prog.tables.iter().find(|t| t.name == obj) {
                        keys.insert((t.id, id), ti);
                    }
                }
                "param" => {
                    if let Some(a) = prog.actions.iter().find(|a| a.name == obj) {
                        params.insert((a.id, id), ti);
                    }
                }
                "ctrl_field" => {
                    ctrl.insert((obj.to_string(), id), ti);
                }
                _ => {}
            }
        }
        let alloc = Mutex::new(types.iter().map(|_| Alloc::default()).collect());
        Ok(Some(Translator {
            types,
            keys,
            params,
            ctrl,
            alloc,
            writing: Mutex::new(()),
        }))
    }

    /// SDN value → data-plane value (canonical bytes) of type `ti`; `allocate`: an unknown SDN
    /// value of an automatically allocated type takes a free data-plane value.
    fn to_dp(&self, ti: usize, sdn: &[u8], allocate: bool, what: &str) -> Result<Vec<u8>, Status> {
        let t = &self.types[ti];
        let key = match t.sdn {
            Sdn::Str => {
                std::str::from_utf8(sdn).map_err(|_| {
                    Status::invalid_argument(format!(
                        "{what} ({}): the value is not a UTF-8 string",
                        t.name
                    ))
                })?;
                sdn.to_vec()
            }
            Sdn::Bits(w) => value_to_bytes(&bytes_to_value(
                sdn,
                w,
                &format!("{what} ({}, {w}-bit SDN values)", t.name),
            )?),
        };
        let shown = || match t.sdn {
            Sdn::Str => format!("`{}`", String::from_utf8_lossy(sdn)),
            Sdn::Bits(_) => format!(
                "0x{}",
                key.iter().map(|b| format!("{b:02x}")).collect::<String>()
            ),
        };
        let fits = |v: u128| t.width >= 128 || v >> t.width == 0;
        let dp = |v: u64| {
            value_to_bytes(&p4sec_ir::Value {
                width: t.width.max(1),
                words: vec![v, 0][..p4sec_ir::words_for(t.width.max(1)) as usize].to_vec(),
            })
        };
        if let Some(f) = &t.fixed {
            return f.get(&key).map(|v| dp(*v)).ok_or_else(|| {
                let mut known: Vec<String> = f.keys().map(|k| String::from_utf8_lossy(k).into_owned()).collect();
                known.sort();
                known.truncate(8);
                Status::invalid_argument(format!(
                    "{what}: {} is not a known {} (the switch's --translate map for it holds {} values: {}{})",
                    shown(),
                    t.name,
                    f.len(),
                    known.join(", "),
                    if f.len() > 8 { ", ..." } else { "" }
                ))
            });
        }
        if t.port {
            let n: u128 = match t.sdn {
                Sdn::Str => {
                    std::str::from_utf8(sdn).ok().filter(|s| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())).and_then(|s| s.parse().ok()).ok_or_else(
                        || {
                            Status::invalid_argument(format!(
                                "{what}: {} is not a port of this switch: without a --translate map for {}, a port is named by its decimal number",
                                shown(),
                                t.name
                            ))
                        },
                    )?
                }
                Sdn::Bits(_) => key.iter().fold(0u128, |a, b| (a << 8) | *b as u128),
            };
            if !fits(n) {
                return Err(Status::out_of_range(format!(
                    "{what}: port {n} does not fit {} ({} bits)",
                    t.name, t.width
                )));
            }
            return Ok(dp(n as u64));
        }
        let mut alloc = self.alloc.lock().unwrap_or_else(|p| p.into_inner());
        let a = &mut alloc[ti];
        if let Some(v) = a.fwd.get(&key) {
            return Ok(dp(*v));
        }
        if !allocate {
            return Err(Status::not_found(format!(
                "{what}: no entry uses the {} {}",
                t.name,
                shown()
            )));
        }
        let max: u64 = if t.width >= 64 {
            u64::MAX
        } else {
            (1u64 << t.width) - 1
        };
        let v = (1..=max).find(|v| !a.rev.contains_key(v)).ok_or_else(|| {
            Status::resource_exhausted(format!(
                "{what}: all {max} values of {} are in use; {} cannot be added",
                t.name,
                shown()
            ))
        })?;
        a.fwd.insert(key.clone(), v);
        a.rev.insert(v, key);
        Ok(dp(v))
    }

    /// Data-plane value → SDN value of type `ti` (a value with no SDN name reads back as its
    /// decimal number).
    fn to_sdn(&self, ti: usize, dp: &[u8]) -> Vec<u8> {
        let t = &self.types[ti];
        let v = dp.iter().fold(0u128, |a, b| (a << 8) | *b as u128);
        let named = match &t.fixed {
            Some(f) => f
                .iter()
                .find(|(_, x)| **x as u128 == v)
                .map(|(k, _)| k.clone()),
            None if t.port => None,
            None => self.alloc.lock().unwrap_or_else(|p| p.into_inner())[ti]
                .rev
                .get(&(v as u64))
                .cloned(),
        };
        match (named, t.sdn) {
            (Some(k), _) => k,
            (None, Sdn::Str) => v.to_string().into_bytes(),
            (None, Sdn::Bits(w)) => value_to_bytes(&p4sec_ir::Value {
                width: w,
                words: vec![v as u64, (v >> 64) as u64],
            }),
        }
    }

    fn action_in(&self, a: &mut p4::Action, allocate: bool) -> Result<(), Status> {
        for p in a.params.iter_mut() {
            if let Some(&ti) = self.params.get(&(a.action_id, p.param_id)) {
                p.value = self.to_dp(
                    ti,
                    &p.value,
                    allocate,
                    &format!("action parameter id {}", p.param_id),
                )?;
            }
        }
        Ok(())
    }

    fn action_out(&self, a: &mut p4::Action) {
        for p in a.params.iter_mut() {
            if let Some(&ti) = self.params.get(&(a.action_id, p.param_id)) {
                p.value = self.to_sdn(ti, &p.value);
            }
        }
    }

    fn table_action_in(
        &self,
        ta: &mut Option<p4::TableAction>,
        allocate: bool,
    ) -> Result<(), Status> {
        match ta.as_mut().and_then(|t| t.r#type.as_mut()) {
            Some(p4::table_action::Type::Action(a)) => self.action_in(a, allocate),
            Some(p4::table_action::Type::ActionProfileActionSet(s)) => s
                .action_profile_actions
                .iter_mut()
                .filter_map(|x| x.action.as_mut())
                .try_for_each(|a| self.action_in(a, allocate)),
            _ => Ok(()),
        }
    }

    /// An update as the controller wrote it → its data-plane form.
    pub fn update_in(&self, u: &mut p4::Update) -> Result<(), Status> {
        use p4::field_match::FieldMatchType as M;
        let allocate = u.r#type != p4::update::Type::Delete as i32;
        match u.entity.as_mut().and_then(|e| e.entity.as_mut()) {
            Some(p4::entity::Entity::TableEntry(te)) => {
                for m in te.r#match.iter_mut() {
                    let Some(&ti) = self.keys.get(&(te.table_id, m.field_id)) else {
                        continue;
                    };
                    let what = format!("match field id {}", m.field_id);
                    match m.field_match_type.as_mut() {
                        Some(M::Exact(x)) => x.value = self.to_dp(ti, &x.value, allocate, &what)?,
                        Some(M::Optional(x)) => x.value = self.to_dp(ti, &x.value, allocate, &what)?,
                        _ => {
                            return Err(Status::invalid_argument(format!(
                                "{what} is of the translated type {}: it is matched exactly (exact or optional)",
                                self.types[ti].name
                            )))
                        }
                    }
                }
                self.table_action_in(&mut te.action, allocate)
            }
            Some(p4::entity::Entity::ActionProfileMember(m)) => m
                .action
                .as_mut()
                .map(|a| self.action_in(a, allocate))
                .unwrap_or(Ok(())),
            _ => Ok(()),
        }
    }

    /// An entity read from the device → its SDN form.
    pub fn entity_out(&self, e: &mut p4::Entity) {
        use p4::field_match::FieldMatchType as M;
        match e.entity.as_mut() {
            Some(p4::entity::Entity::TableEntry(te)) => {
                for m in te.r#match.iter_mut() {
                    let Some(&ti) = self.keys.get(&(te.table_id, m.field_id)) else {
                        continue;
                    };
                    match m.field_match_type.as_mut() {
                        Some(M::Exact(x)) => x.value = self.to_sdn(ti, &x.value),
                        Some(M::Optional(x)) => x.value = self.to_sdn(ti, &x.value),
                        _ => {}
                    }
                }
                match te.action.as_mut().and_then(|t| t.r#type.as_mut()) {
                    Some(p4::table_action::Type::Action(a)) => self.action_out(a),
                    Some(p4::table_action::Type::ActionProfileActionSet(s)) => s
                        .action_profile_actions
                        .iter_mut()
                        .filter_map(|x| x.action.as_mut())
                        .for_each(|a| self.action_out(a)),
                    _ => {}
                }
            }
            Some(p4::entity::Entity::ActionProfileMember(m)) => {
                if let Some(a) = m.action.as_mut() {
                    self.action_out(a)
                }
            }
            _ => {}
        }
    }

    /// Packet-out metadata → data-plane values (SDN values must be known: nothing is allocated).
    pub fn packet_out(&self, po: &p4::PacketOut) -> Result<p4::PacketOut, Status> {
        let mut po = po.clone();
        for m in po.metadata.iter_mut() {
            if let Some(&ti) = self.ctrl.get(&("packet_out".to_string(), m.metadata_id)) {
                m.value = self.to_dp(
                    ti,
                    &m.value,
                    false,
                    &format!("packet-out metadata id {}", m.metadata_id),
                )?;
            }
        }
        Ok(po)
    }

    /// Packet-in metadata → SDN values.
    pub fn packet_in(&self, md: &mut [p4::PacketMetadata]) {
        for m in md.iter_mut() {
            if let Some(&ti) = self.ctrl.get(&("packet_in".to_string(), m.metadata_id)) {
                m.value = self.to_sdn(ti, &m.value);
            }
        }
    }

    /// Free the automatically allocated values no table entry and no action profile member
    /// (`members`) uses any more.
    pub(crate) fn collect(&self, engine: &Engine) {
        let prog = &engine.prog;
        let auto: Vec<bool> = self
            .types
            .iter()
            .map(|t| t.fixed.is_none() && !t.port)
            .collect();
        if !auto.iter().any(|x| *x) {
            return;
        }
        let mut used: Vec<std::collections::HashSet<u64>> =
            self.types.iter().map(|_| Default::default()).collect();
        let low = |v: &p4sec_ir::Value| v.words.first().copied().unwrap_or(0);
        for (i, t) in prog.tables.iter().enumerate() {
            let kt: Vec<Option<usize>> = t
                .keys
                .iter()
                .map(|k| self.keys.get(&(t.id, k.id)).copied().filter(|ti| auto[*ti]))
                .collect();
            let any_param = t.actions.iter().any(|ta| {
                prog.actions[ta.action as usize].params.iter().any(|p| {
                    self.params
                        .contains_key(&(prog.actions[ta.action as usize].id, p.id))
                })
            });
            if kt.iter().all(|x| x.is_none()) && !any_param {
                continue;
            }
            let _ = engine.table_for_each_entry(i, |e| {
                for (m, ti) in e.matches.iter().zip(&kt) {
                    if let (Some(ti), FieldMatch::Exact(v) | FieldMatch::Optional(Some(v))) =
                        (ti, m)
                    {
                        used[*ti].insert(low(v));
                    }
                }
                let act = &prog.actions[e.action.action as usize];
                for (p, v) in act.params.iter().zip(&e.action.args) {
                    if let Some(&ti) = self.params.get(&(act.id, p.id)) {
                        used[ti].insert(low(v));
                    }
                }
            });
        }
        for (_, _, call) in engine.profile_members() {
            let act = &prog.actions[call.action as usize];
            for (p, v) in act.params.iter().zip(&call.args) {
                if let Some(&ti) = self.params.get(&(act.id, p.id)) {
                    used[ti].insert(low(v));
                }
            }
        }
        let mut alloc = self.alloc.lock().unwrap_or_else(|p| p.into_inner());
        for (ti, a) in alloc.iter_mut().enumerate() {
            if !auto[ti] {
                continue;
            }
            a.rev.retain(|v, _| used[ti].contains(v));
            let rev = &a.rev;
            a.fwd.retain(|_, v| rev.contains_key(v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_parse() {
        assert_eq!(
            parse_annotation("@p4runtime_translation(\"\" , string)").unwrap(),
            Some((String::new(), Sdn::Str))
        );
        assert_eq!(
            parse_annotation("@p4runtime_translation(\"p4.org/psa/v1/PortId_t\", 32)").unwrap(),
            Some(("p4.org/psa/v1/PortId_t".into(), Sdn::Bits(32)))
        );
        assert_eq!(parse_annotation("@name(\"x\")").unwrap(), None);
        assert!(parse_annotation("@p4runtime_translation(\"u\", float)")
            .unwrap_err()
            .contains("neither `string` nor a bit width"));
    }
}
