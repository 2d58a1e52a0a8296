//! `esp_sad`: the ESP security association database extern (RFC 4303 tunnel mode): SA slots installed by the
//! control plane (`add_sa`, undone by `del_sa`; `sa_stats`), and `encap`/`decap` of the packet's payload.

use super::common::{NO_SA, OK, SCRATCH};
use crate::esp::{esp_of_ip, EspError, Sa, SaConfig};
use crate::iface::{BitBuf, Dir, ExternError, ExternObject, ExternType, MethodSig, Payload};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

pub(super) struct EspSadType;

impl ExternType for EspSadType {
    fn name(&self) -> &str {
        "esp_sad"
    }
    fn instantiate(&self, _name: &str, args: &[BitBuf]) -> Result<Box<dyn ExternObject>, String> {
        let size = args.first().map(|a| a.as_u64()).ok_or("esp_sad needs a size")?;
        if size == 0 || size > 1 << 20 {
            return Err(format!("esp_sad size {size} is out of range (1..2^20)"));
        }
        Ok(Box::new(EspSad { slots: (0..size).map(|_| RwLock::new(None)).collect(), by_spi: RwLock::new(HashMap::new()) }))
    }
    fn undo_op(&self, op: &str) -> Option<&'static str> {
        (op == "add_sa").then_some("del_sa")
    }
}

/// The SA database: slots of SAs and an SPI index for inbound lookups. Readers take per-slot read locks
/// (uncontended on the packet path); SA state itself is per SA.
pub struct EspSad {
    slots: Vec<RwLock<Option<Arc<Sa>>>>,
    by_spi: RwLock<HashMap<u32, u32>>,
}

#[derive(serde::Deserialize)]
struct AddSa {
    index: u32,
    sa: SaConfig,
}

#[derive(serde::Deserialize)]
struct Index {
    index: u32,
}

impl EspSad {
    fn sa(&self, i: u64) -> Option<Arc<Sa>> {
        self.slots.get(i as usize).and_then(|s| s.read().unwrap_or_else(|p| p.into_inner()).clone())
    }
}

/// Encapsulate the inner packet given as its parsed IP header (`hdr`) followed by `payload`; the header's
/// buffer holds the concatenation meanwhile (no allocation once it has grown).
fn encap_with_header(sa: &Sa, hdr: &mut BitBuf, payload: &[u8], out: &mut Vec<u8>) -> Result<u64, EspError> {
    let hdr_len = hdr.bytes.len();
    hdr.bytes.extend_from_slice(payload);
    let r = sa.encapsulate(&hdr.bytes, out);
    hdr.bytes.truncate(hdr_len);
    r
}

/// The IP header at the start of `pkt` into `hdrs[0]` (IPv4 without options, 20 bytes) or `hdrs[1]` (IPv6,
/// 40 bytes): its version and length; `None` for anything else (options, truncated, not IP).
fn split_ip_header(pkt: &[u8], hdrs: &mut [BitBuf]) -> Option<(u64, usize)> {
    match pkt.first()? {
        0x45 if pkt.len() >= 20 => {
            hdrs[0].bytes.copy_from_slice(&pkt[..20]);
            Some((4, 20))
        }
        b if b >> 4 == 6 && pkt.len() >= 40 => {
            hdrs[1].bytes.copy_from_slice(&pkt[..40]);
            Some((6, 40))
        }
        _ => None,
    }
}

impl ExternObject for EspSad {
    fn resolve(&self, sig: &MethodSig) -> Result<u32, String> {
        match (sig.name.as_str(), sig.args.as_slice()) {
            ("encap", [(Dir::In, 32), (Dir::Out, 8)]) => Ok(0),
            ("encap", [(Dir::In, 32), (Dir::In, h), (Dir::Out, 8)]) if h % 8 == 0 => Ok(2),
            ("decap", [(Dir::In, 32), (Dir::Out, 32), (Dir::Out, 8)]) => Ok(1),
            ("decap_sa", [(Dir::In, 32), (Dir::Out, 8)]) => Ok(3),
            ("encap_split", [(Dir::In, 32), (Dir::In, h), (Dir::Out, 160), (Dir::Out, 320), (Dir::Out, 8), (Dir::Out, 8)]) if h % 8 == 0 => Ok(6),
            ("decap_split", [(Dir::In, 32), (Dir::Out, 160), (Dir::Out, 320), (Dir::Out, 8), (Dir::Out, 8)]) => Ok(7),
            ("lifetime_event", [(Dir::In, 32), (Dir::Out, 8)]) => Ok(4),
            ("lifetime_event", [(Dir::In, 32), (Dir::Out, 8), (Dir::Out, 32)]) => Ok(5),
            (n, _) => Err(format!("esp_sad has no method `{n}` with this signature")),
        }
    }

    fn call(&self, method: u32, args: &mut [BitBuf], _ret: Option<&mut BitBuf>, payload: &mut Payload<'_>) -> Result<(), ExternError> {
        match method {
            0 | 2 => {
                // method 2 passes the inner packet's IP header as a parsed header: it goes in front of the payload
                let status_arg = if method == 0 { 1 } else { 2 };
                let status = match self.sa(args[0].as_u64()) {
                    None => NO_SA,
                    Some(sa) => SCRATCH.with(|s| {
                        let mut out = s.borrow_mut();
                        let r = if method == 0 {
                            sa.encapsulate(payload.bytes(), &mut out)
                        } else {
                            encap_with_header(&sa, &mut args[1], payload.bytes(), &mut out)
                        };
                        match r {
                            Ok(_) => {
                                payload.swap_in(&mut *out);
                                OK
                            }
                            Err(e) => e.code() as u64,
                        }
                    }),
                };
                args[status_arg].set_u64(status);
                Ok(())
            }
            1 => {
                let spi = args[0].as_u64() as u32;
                let idx = self.by_spi.read().unwrap_or_else(|p| p.into_inner()).get(&spi).copied();
                let (index, status) = match idx.and_then(|i| self.sa(i as u64).map(|s| (i, s))) {
                    None => (0, NO_SA),
                    Some((i, sa)) => SCRATCH.with(|s| {
                        let mut out = s.borrow_mut();
                        match sa.decapsulate(payload.bytes(), &mut out) {
                            Ok(_) => {
                                payload.swap_in(&mut *out);
                                (i, OK)
                            }
                            Err(e) => (i, e.code() as u64),
                        }
                    }),
                };
                args[1].set_u64(index as u64);
                args[2].set_u64(status);
                Ok(())
            }
            3 => {
                // the SA chosen by the program (SAD-dec table on outer addresses and SPI); the SPI must be its own
                let status = match self.sa(args[0].as_u64()) {
                    None => NO_SA,
                    Some(sa) => SCRATCH.with(|s| {
                        let mut out = s.borrow_mut();
                        match sa.decapsulate(payload.bytes(), &mut out) {
                            Ok(_) => {
                                payload.swap_in(&mut *out);
                                OK
                            }
                            Err(e) => e.code() as u64,
                        }
                    }),
                };
                args[1].set_u64(status);
                Ok(())
            }
            6 => {
                // encap with the inner IP header given as a parsed header; the outer IP header comes back in
                // `outer4` or `outer6` (by `outer_version`), the payload is ESP header, IV, ciphertext and ICV
                let (mut version, mut status) = (0u64, NO_SA);
                if let Some(sa) = self.sa(args[0].as_u64()) {
                    SCRATCH.with(|s| {
                        let mut out = s.borrow_mut();
                        status = match encap_with_header(&sa, &mut args[1], payload.bytes(), &mut out) {
                            Ok(_) => match split_ip_header(&out, &mut args[2..4]) {
                                Some((v, hl)) => {
                                    version = v;
                                    payload.set(&out[hl..]);
                                    OK
                                }
                                None => EspError::BadInner.code() as u64,
                            },
                            Err(e) => e.code() as u64,
                        };
                    });
                }
                args[4].set_u64(version);
                args[5].set_u64(status);
                Ok(())
            }
            7 => {
                // decap with the SA the program selected; a plain inner IP header (IPv4 without options, or
                // IPv6) comes back in `inner4` or `inner6` (by `inner_version`) and the payload is what follows
                // it; otherwise `inner_version` is 0 and the payload is the whole inner packet
                let (mut version, mut status) = (0u64, NO_SA);
                if let Some(sa) = self.sa(args[0].as_u64()) {
                    SCRATCH.with(|s| {
                        let mut out = s.borrow_mut();
                        status = match sa.decapsulate(payload.bytes(), &mut out) {
                            Ok(_) => {
                                match split_ip_header(&out, &mut args[1..3]) {
                                    Some((v, hl)) => {
                                        version = v;
                                        payload.set(&out[hl..]);
                                    }
                                    None => payload.swap_in(&mut *out),
                                }
                                OK
                            }
                            Err(e) => e.code() as u64,
                        };
                    });
                }
                args[3].set_u64(version);
                args[4].set_u64(status);
                Ok(())
            }
            4 | 5 => {
                let sa = self.sa(args[0].as_u64());
                let ev = sa.as_ref().map(|sa| sa.take_event()).unwrap_or(0);
                args[1].set_u64(ev as u64);
                if method == 5 {
                    args[2].set_u64(sa.map(|sa| sa.cfg.spi as u64).unwrap_or(0));
                }
                Ok(())
            }
            m => Err(ExternError::UnknownMethod(m)),
        }
    }

    /// `add_sa` {"index", "sa": SaConfig}, `del_sa` {"index"}, `sa_stats` {"index"}, `get_sas` {} (every occupied
    /// slot as `{"sas": [[index, spi], ...]}`, for a controller comparing its state with the switch's; no keys) (JSON).
    fn control(&self, op: &str, args: &[u8]) -> Result<Vec<u8>, String> {
        match op {
            "add_sa" => {
                let a: AddSa = serde_json::from_slice(args).map_err(|e| format!("add_sa: {e}"))?;
                let slot = self.slots.get(a.index as usize).ok_or_else(|| format!("SA index {} is out of range ({} slots)", a.index, self.slots.len()))?;
                let spi = a.sa.spi;
                let sa = Sa::new(a.sa).map_err(|e| format!("add_sa: invalid SA ({e:?})"))?;
                let mut by = self.by_spi.write().unwrap_or_else(|p| p.into_inner());
                if let Some(other) = by.get(&spi) {
                    if *other != a.index {
                        return Err(format!("SPI {spi:#x} is already used by SA {other}"));
                    }
                }
                let mut s = slot.write().unwrap_or_else(|p| p.into_inner());
                if let Some(old) = s.as_ref() {
                    by.remove(&old.cfg.spi);
                }
                *s = Some(Arc::new(sa));
                by.insert(spi, a.index);
                Ok(b"{}".to_vec())
            }
            "del_sa" => {
                let a: Index = serde_json::from_slice(args).map_err(|e| format!("del_sa: {e}"))?;
                let slot = self.slots.get(a.index as usize).ok_or_else(|| format!("SA index {} is out of range", a.index))?;
                let old = slot.write().unwrap_or_else(|p| p.into_inner()).take().ok_or_else(|| format!("no SA in slot {}", a.index))?;
                self.by_spi.write().unwrap_or_else(|p| p.into_inner()).remove(&old.cfg.spi);
                Ok(b"{}".to_vec())
            }
            "sa_stats" => {
                let a: Index = serde_json::from_slice(args).map_err(|e| format!("sa_stats: {e}"))?;
                let sa = self.sa(a.index as u64).ok_or_else(|| format!("no SA in slot {}", a.index))?;
                Ok(serde_json::to_vec(&sa.stats()).unwrap_or_default())
            }
            "get_sas" => {
                let mut sas = Vec::new();
                for (i, slot) in self.slots.iter().enumerate() {
                    if let Some(sa) = slot.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
                        sas.push((i as u64, sa.cfg.spi));
                    }
                }
                Ok(serde_json::to_vec(&serde_json::json!({ "sas": sas })).unwrap_or_default())
            }
            other => Err(format!("esp_sad has no control operation `{other}` (add_sa, del_sa, sa_stats, get_sas)")),
        }
    }

    fn drain_events(&self) -> Vec<String> {
        let mut v = vec![];
        for s in &self.slots {
            if let Some(sa) = s.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
                v.extend(sa.drain_events());
            }
        }
        v
    }
}

/// Decapsulate a whole outer IP packet (helper for tests and tools).
pub fn decap_ip(sa: &Sa, packet: &[u8], out: &mut Vec<u8>) -> Result<u64, EspError> {
    sa.decapsulate(esp_of_ip(packet)?, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `esp_sad` names `del_sa` as the undo of `add_sa` (what a P4Runtime DELETE of an SA entry runs), and
    /// nothing else has an undo.
    #[test]
    fn add_sa_is_undone_by_del_sa() {
        assert_eq!(EspSadType.undo_op("add_sa"), Some("del_sa"));
        assert_eq!(EspSadType.undo_op("del_sa"), None);
        assert_eq!(EspSadType.undo_op("sa_stats"), None);
    }
}
