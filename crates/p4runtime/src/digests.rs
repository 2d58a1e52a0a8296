//! Digests on the P4Runtime device: the engine's digest messages sent to the primary controller as
//! DigestLists (for the digests it enabled with DigestEntry writes), and the cache of lists that
//! wait for their acknowledgement.

use crate::codec::value_to_bytes;
use crate::device::Device;
use crate::proto::p4::v1 as p4;
use p4sec_engine::Engine;
use p4sec_ir::Program;
use prost::Message;
use tonic::Status;

impl Device {
    /// Send the engine's pending digest messages to the primary controller as DigestList messages,
    /// for the digests it enabled (at most `max_list_size` messages per list when that is set). The
    /// messages of a list are distinct, and data still held by a list that waits for its
    /// acknowledgement (for at most `ack_timeout_ns`; 0 keeps nothing) is not sent again.
    pub fn deliver_digests(&self, engine: &Engine) {
        use std::sync::atomic::Ordering::Relaxed;
        if !engine.has_digests() {
            return;
        }
        let msgs = engine.drain_digests();
        let configs = self
            .digest_configs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut cache = self.digest_cache.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        for (id, c) in &configs {
            cache.expire(
                *id,
                std::time::Duration::from_nanos(c.ack_timeout_ns.max(0) as u64),
                now,
            );
        }
        let mut batch = std::collections::HashSet::new();
        let mut per: Vec<(u32, i32, Vec<(p4::P4Data, Vec<u8>)>)> = vec![];
        for (idx, vals) in msgs {
            let Some(d) = engine.prog.digests.get(idx as usize) else {
                continue;
            };
            let Some(cfg) = configs.get(&d.id) else {
                self.digests_dropped.fetch_add(1, Relaxed);
                continue;
            };
            let members = vals
                .iter()
                .map(|v| p4::P4Data {
                    data: Some(p4::p4_data::Data::Bitstring(value_to_bytes(v))),
                })
                .collect();
            let data = p4::P4Data {
                data: Some(p4::p4_data::Data::Struct(p4::P4StructLike { members })),
            };
            let mut key = d.id.to_be_bytes().to_vec();
            data.encode(&mut key).expect("a Vec grows");
            if cache.sent.contains(&key) || !batch.insert(key.clone()) {
                self.digests_deduplicated.fetch_add(1, Relaxed);
                continue;
            }
            match per.iter_mut().find(|(id, _, _)| *id == d.id) {
                Some((_, _, list)) => list.push((data, key)),
                None => per.push((d.id, cfg.max_list_size, vec![(data, key)])),
            }
        }
        let a = self.arb.lock().unwrap_or_else(|p| p.into_inner());
        let primary = a.primary();
        let tx = a
            .controllers
            .values()
            .find(|c| Some(c.election_id) == primary)
            .map(|c| c.tx.clone());
        drop(a);
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0);
        for (id, max, list) in per {
            let keep = configs.get(&id).is_some_and(|c| c.ack_timeout_ns > 0);
            let chunk = if max > 0 {
                max as usize
            } else {
                list.len().max(1)
            };
            for part in list.chunks(chunk) {
                let list_id = self.next_list_id.fetch_add(1, Relaxed);
                let msg = p4::StreamMessageResponse {
                    update: Some(p4::stream_message_response::Update::Digest(
                        p4::DigestList {
                            digest_id: id,
                            list_id,
                            data: part.iter().map(|(d, _)| d.clone()).collect(),
                            timestamp: stamp,
                        },
                    )),
                };
                if !tx
                    .as_ref()
                    .map(|t| t.try_send(Ok(msg)).is_ok())
                    .unwrap_or(false)
                {
                    self.digests_dropped.fetch_add(part.len() as u64, Relaxed);
                } else if keep {
                    cache.add(
                        id,
                        list_id,
                        now,
                        part.iter().map(|(_, k)| k.clone()).collect(),
                    );
                }
            }
        }
    }

    /// A DigestListAck from the primary controller: the list's data may be sent again.
    pub(crate) fn digest_ack(&self, ack: &p4::DigestListAck) {
        self.digest_cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove_list(ack.digest_id, ack.list_id);
    }

    pub(crate) fn digest_cache_clear(&self) {
        self.digest_cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    pub(crate) fn write_digest_entry(
        &self,
        prog: &Program,
        ty: p4::update::Type,
        d: &p4::DigestEntry,
    ) -> Result<(), Status> {
        use p4::update::Type as T;
        if !prog.digests.iter().any(|x| x.id == d.digest_id) {
            return Err(Status::not_found(format!(
                "no digest with id {}",
                d.digest_id
            )));
        }
        let mut c = self
            .digest_configs
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let exists = c.contains_key(&d.digest_id);
        match ty {
            T::Insert if exists => Err(Status::already_exists(format!(
                "digest {} is already enabled",
                d.digest_id
            ))),
            T::Modify | T::Delete if !exists => Err(Status::not_found(format!(
                "digest {} is not enabled",
                d.digest_id
            ))),
            T::Delete => {
                c.remove(&d.digest_id);
                self.digest_cache_clear();
                Ok(())
            }
            T::Insert | T::Modify => {
                let cfg = d
                    .config
                    .ok_or_else(|| Status::invalid_argument("digest entry without a config"))?;
                if cfg.max_list_size < 0 || cfg.max_timeout_ns < 0 || cfg.ack_timeout_ns < 0 {
                    return Err(Status::invalid_argument(
                        "digest configuration values cannot be negative",
                    ));
                }
                c.insert(d.digest_id, cfg);
                self.digest_cache_clear();
                Ok(())
            }
            T::Unspecified => Err(Status::invalid_argument("unspecified update type")),
        }
    }

    pub(crate) fn read_digest_entries(&self, d: &p4::DigestEntry, out: &mut Vec<p4::Entity>) {
        let c = self
            .digest_configs
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut ids: Vec<&u32> = c.keys().collect();
        ids.sort();
        for id in ids {
            if d.digest_id == 0 || *id == d.digest_id {
                out.push(p4::Entity {
                    entity: Some(p4::entity::Entity::DigestEntry(p4::DigestEntry {
                        digest_id: *id,
                        config: c.get(id).cloned(),
                    })),
                });
            }
        }
    }
}
