//! The control API of `esp_sad`, JSON in and out: SAs installed (`add_sa`, which `del_sa` undoes),
//! removed, their counters read (`sa_stats`) and the occupied slots listed (`get_sas`).

use super::sa_table::Sad;
use crate::esp::{Sa, SaConfig};

#[derive(serde::Deserialize)]
struct AddSa {
    index: u32,
    sa: SaConfig,
}

#[derive(serde::Deserialize)]
struct Index {
    index: u32,
}

/// `add_sa` {"index", "sa": SaConfig}, `del_sa` {"index"}, `sa_stats` {"index"}, `get_sas` {}
/// (every occupied slot as `{"sas": [[index, spi], ...]}`, for a controller comparing its state
/// with the switch's; no keys) (JSON).
pub(super) fn control(db: &Sad, op: &str, args: &[u8]) -> Result<Vec<u8>, String> {
    match op {
        "add_sa" => {
            let a: AddSa = serde_json::from_slice(args).map_err(|e| format!("add_sa: {e}"))?;
            if a.index as usize >= db.len() {
                return Err(format!(
                    "SA index {} is out of range ({} slots)",
                    a.index,
                    db.len()
                ));
            }
            let spi = a.sa.spi;
            if let Some(why) = a.sa.problem() {
                return Err(format!("add_sa: invalid SA {spi:#x}: {why}"));
            }
            let sa = Sa::new(a.sa).map_err(|e| format!("add_sa: invalid SA {spi:#x} ({e:?})"))?;
            db.install(a.index, sa)?;
            Ok(b"{}".to_vec())
        }
        "del_sa" => {
            let a: Index = serde_json::from_slice(args).map_err(|e| format!("del_sa: {e}"))?;
            db.remove(a.index)?;
            Ok(b"{}".to_vec())
        }
        "sa_stats" => {
            let a: Index = serde_json::from_slice(args).map_err(|e| format!("sa_stats: {e}"))?;
            let sa = db
                .sa(a.index as u64)
                .ok_or_else(|| format!("no SA in slot {}", a.index))?;
            Ok(serde_json::to_vec(&sa.stats()).unwrap_or_default())
        }
        "get_sas" => {
            let sas = db.occupied();
            Ok(serde_json::to_vec(&serde_json::json!({ "sas": sas })).unwrap_or_default())
        }
        other => Err(format!(
            "esp_sad has no control operation `{other}` (add_sa, del_sa, sa_stats, get_sas)"
        )),
    }
}
