//! The P4Info facts the engine does not need (annotations, documentation, `type_info`), as the
//! front end collects them and the program file carries them; `p4info.rs` writes them out.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// P4Info facts the engine does not need, collected by the front end: the annotations, structured
/// annotations and documentation of every P4Info object, and the `type_info` section.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct P4InfoMeta {
    /// By object key: `table NAME`, `key TABLE ID`, `action NAME`, `param ACTION ID`, `ref TABLE
    /// ACTION_ID`, `counter NAME` (also `direct_counter`, `meter`, `direct_meter`, `register`,
    /// `action_profile`, `value_set`, `digest`), `ctrl NAME`, `ctrl_field NAME ID`.
    pub annos: BTreeMap<String, Annos>,
    /// `type_info.serializable_enums`: enum name -> (underlying width, members with their values).
    pub serializable_enums: BTreeMap<String, (u32, Vec<(String, Vec<u8>)>)>,
    /// `type_info.new_types` (`type bit<W> T` used by a P4Info object): name -> width.
    #[serde(default)]
    pub new_types: BTreeMap<String, (u32, Vec<String>)>,
    /// The P4Info `type_name` of match fields, action parameters and controller header fields of a
    /// new type, by object key (`key TABLE ID`, `param ACTION ID`, `ctrl_field NAME ID`).
    #[serde(default)]
    pub type_names: BTreeMap<String, String>,
    /// Tables that are never applied (the reference compiler removes them, and actions, direct
    /// resources and profiles only they use).
    #[serde(default)]
    pub unused_tables: std::collections::BTreeSet<String>,
    /// The program calls externs whose arguments the reference compiler describes with type specs
    /// (hash, checksums): with tables, registers, digests and named types, this makes it write a
    /// `type_info`.
    #[serde(default)]
    pub type_specs: bool,
    /// `@pkginfo(k=v, ...)` of `main`: (key, value) pairs.
    #[serde(default)]
    pub pkg_info: Vec<(String, String)>,
}

/// The annotations of one P4Info object, as the reference compiler writes them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Annos {
    /// Unstructured annotations rendered as `@name(tokens)`, in source order.
    pub annotations: Vec<String>,
    pub structured: Vec<StructuredAnno>,
    /// `@brief` and `@description`.
    pub brief: Option<String>,
    pub description: Option<String>,
}

/// A structured annotation `@name[k=v, ...]` (key-value list) or `@name[e, ...]` (expression list).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StructuredAnno {
    pub name: String,
    pub kv: bool,
    /// (key, value); the key is empty in an expression list.
    pub items: Vec<(String, AnnoValue)>,
}

/// A value in a structured annotation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum AnnoValue {
    Str(String),
    Int(i64),
    Bool(bool),
}

impl P4InfoMeta {
    /// The annotations of object `key`.
    pub fn get(&self, key: &str) -> Option<&Annos> {
        self.annos.get(key)
    }

    /// The object carries `@hidden`: the reference compiler leaves it out of the P4Info.
    pub fn hidden(&self, key: &str) -> bool {
        self.get(key)
            .is_some_and(|a| a.annotations.iter().any(|s| s == "@hidden"))
    }

    /// The integer argument of annotation `@name(N)` on object `key`.
    pub fn int_anno(&self, key: &str, name: &str) -> Option<u64> {
        let pre = format!("@{name}(");
        self.get(key)?
            .annotations
            .iter()
            .find_map(|s| s.strip_prefix(&pre)?.strip_suffix(')')?.trim().parse().ok())
    }
}

/// How the controller writes the values of a type with `@p4runtime_translation`: as strings, or as
/// unsigned integers of a given width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SdnType {
    Str,
    Bits(u32),
}

/// The arguments of a new type's annotation `@p4runtime_translation("uri", string)` / `("uri",
/// 32)`: `Ok(None)` for any other annotation, an error naming the annotation for a malformed one.
pub fn parse_translation(a: &str) -> Result<Option<(String, SdnType)>, String> {
    let Some(body) = a
        .strip_prefix("@p4runtime_translation(")
        .and_then(|s| s.strip_suffix(')'))
    else {
        return Ok(None);
    };
    let (uri, kind) = body
        .rsplit_once(',')
        .ok_or_else(|| format!("`{a}`: expected (\"uri\", string) or (\"uri\", BITWIDTH)"))?;
    let uri = uri.trim().trim_matches('"').to_string();
    let kind = kind.trim();
    let sdn = match kind {
        "string" => SdnType::Str,
        n => SdnType::Bits(
            n.parse()
                .ok()
                .filter(|w| (1..=128).contains(w))
                .ok_or_else(|| {
                    format!("`{a}`: the SDN type `{n}` is neither `string` nor a bit width")
                })?,
        ),
    };
    Ok(Some((uri, sdn)))
}

/// A new type's translation, if one of its annotations asks for one (a malformed one counts as none
/// here; the switch refuses it when it loads the program).
pub fn translation_of(annos: &[String]) -> Option<(String, SdnType)> {
    annos
        .iter()
        .find_map(|a| parse_translation(a).ok().flatten())
}
