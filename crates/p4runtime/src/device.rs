//! The P4Runtime device as the switch uses it: the installed forwarding pipeline, the controllers
//! connected to it (for packet-in, digests and idle-timeout notifications), the packet-out queue,
//! digest state, action profiles and port liveness.

use crate::codec::{bytes_to_value, from_entry, read_field, value_to_bytes, write_field};
use crate::proto::p4::config::v1 as cfg;
use crate::proto::p4::v1 as p4;
use p4sec_engine::Engine;
use p4sec_externs::iface::ExternType;
use p4sec_ir::Program;
use prost::Message;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::mpsc;
use tonic::Status;

/// The forwarding pipeline installed on the device.
pub struct Pipeline {
    pub engine: Arc<Engine>,
    pub p4info: cfg::P4Info,
    pub device_config: Vec<u8>,
    pub cookie: u64,
    /// The P4Runtime type translation of the program's `@p4runtime_translation` types (None: it has
    /// none).
    pub translator: Option<Arc<crate::translate::Translator>>,
}

pub(crate) struct Controller {
    pub(crate) election_id: u128,
    pub(crate) tx: mpsc::Sender<Result<p4::StreamMessageResponse, Status>>,
    /// The client's address (for the log).
    pub(crate) peer: String,
    /// Its certificate under mutual TLS: the primary's Write and SetForwardingPipelineConfig must
    /// come with the same one.
    pub(crate) identity: Option<crate::authz::Identity>,
}

#[derive(Default)]
pub(crate) struct Arbitration {
    pub(crate) next: u64,
    pub(crate) controllers: HashMap<u64, Controller>,
}

impl Arbitration {
    pub(crate) fn primary(&self) -> Option<u128> {
        self.controllers.values().map(|c| c.election_id).max()
    }
    /// The primary controller's election id and address.
    pub(crate) fn primary_info(&self) -> Option<(u128, String)> {
        self.controllers
            .values()
            .max_by_key(|c| c.election_id)
            .map(|c| (c.election_id, c.peer.clone()))
    }
    /// The primary controller's certificate (None: no primary, or no mutual TLS).
    pub(crate) fn primary_identity(&self) -> Option<&crate::authz::Identity> {
        self.controllers
            .values()
            .max_by_key(|c| c.election_id)
            .and_then(|c| c.identity.as_ref())
    }
}

/// One P4Runtime device.
pub struct Device {
    pub device_id: u64,
    pub pipeline: RwLock<Option<Arc<Pipeline>>>,
    pub(crate) arb: Mutex<Arbitration>,
    /// The CPU port: frames the pipeline sends there go to the primary controller as PacketIn, and
    /// PacketOut frames enter the pipeline as received on it.
    pub cpu_port: Option<u32>,
    /// PacketOut frames (controller header already prepended) on their way to the data plane: one
    /// datagram per frame; the packet loop polls `packet_out_rx`.
    packet_out_tx: std::os::unix::net::UnixDatagram,
    pub packet_out_rx: std::os::unix::net::UnixDatagram,
    /// PacketIn messages that could not be delivered (no primary controller, or its queue was
    /// full).
    pub packet_in_dropped: std::sync::atomic::AtomicU64,
    /// A pipeline saved by VERIFY_AND_SAVE, waiting for COMMIT.
    pub(crate) saved: Mutex<Option<Arc<Pipeline>>>,
    /// Digests the controller asked for (DigestEntry writes): digest id → configuration.
    pub(crate) digest_configs: Mutex<HashMap<u32, p4::digest_entry::Config>>,
    next_list_id: std::sync::atomic::AtomicU64,
    /// Digest messages dropped: not enabled by the controller, or no primary controller to receive
    /// them.
    pub digests_dropped: std::sync::atomic::AtomicU64,
    /// Digest messages not sent because a digest list holding the same data waits for its
    /// acknowledgement.
    pub digests_deduplicated: std::sync::atomic::AtomicU64,
    digest_cache: Mutex<DigestCache>,
    /// Action profile members and groups of the installed pipeline.
    pub(crate) profiles: Mutex<crate::profiles::Profiles>,
    /// Port liveness reported by the data plane (watch ports of selector group members).
    ports: Arc<crate::profiles::PortStatus>,
    /// The extern types pipelines of this device may instantiate.
    externs: Vec<Box<dyn ExternType>>,
    /// Maps for translated types (`p4sec switch --translate`), by type name or URI; used by the
    /// pipelines built after they are set.
    pub translate_maps: RwLock<crate::translate::Maps>,
}

/// Digest data sent to the controller and not acknowledged yet (the P4Runtime digest "cache"): the
/// same data is not sent again until its list is acknowledged or `ack_timeout_ns` has passed. At
/// most [`DIGEST_CACHE_MAX`] messages are held (the oldest lists go first: a duplicate is then
/// possible, a loss never).
#[derive(Default)]
struct DigestCache {
    /// Per digest id, its unacknowledged lists in the order they were sent: (list id, sent at,
    /// messages).
    lists: HashMap<u32, std::collections::VecDeque<(u64, std::time::Instant, Vec<Vec<u8>>)>>,
    /// Every message of `lists`: the digest id (4 bytes, big-endian) then the encoded `P4Data`.
    sent: std::collections::HashSet<Vec<u8>>,
}

const DIGEST_CACHE_MAX: usize = 1 << 16;

impl DigestCache {
    fn forget(&mut self, msgs: Vec<Vec<u8>>) {
        for m in msgs {
            self.sent.remove(&m);
        }
    }
    /// A DigestListAck: the list's data may be sent again.
    fn remove_list(&mut self, digest_id: u32, list_id: u64) {
        let Some(q) = self.lists.get_mut(&digest_id) else {
            return;
        };
        if let Some(i) = q.iter().position(|(l, _, _)| *l == list_id) {
            if let Some((_, _, msgs)) = q.remove(i) {
                self.forget(msgs);
            }
        }
    }
    /// Drop the lists of `digest_id` sent `ack_timeout` or longer ago.
    fn expire(
        &mut self,
        digest_id: u32,
        ack_timeout: std::time::Duration,
        now: std::time::Instant,
    ) {
        let Some(q) = self.lists.get_mut(&digest_id) else {
            return;
        };
        let mut old = vec![];
        while q
            .front()
            .is_some_and(|(_, t, _)| now.duration_since(*t) >= ack_timeout)
        {
            old.extend(q.pop_front().map(|(_, _, m)| m).unwrap_or_default());
        }
        self.forget(old);
    }
    fn add(&mut self, digest_id: u32, list_id: u64, now: std::time::Instant, msgs: Vec<Vec<u8>>) {
        for m in &msgs {
            self.sent.insert(m.clone());
        }
        let q = self.lists.entry(digest_id).or_default();
        q.push_back((list_id, now, msgs));
        while self.sent.len() > DIGEST_CACHE_MAX {
            let Some((_, _, m)) = q.pop_front() else {
                break;
            };
            for x in m {
                self.sent.remove(&x);
            }
        }
    }
    fn clear(&mut self) {
        self.lists.clear();
        self.sent.clear();
    }
}

impl Device {
    /// A device with no pipeline yet. `cpu_port`: the port whose frames are packet-in/out;
    /// `externs`: the extern types its pipelines may instantiate (the switch's extern set,
    /// assembled once by its caller).
    pub fn new(
        device_id: u64,
        cpu_port: Option<u32>,
        externs: Vec<Box<dyn ExternType>>,
    ) -> Arc<Device> {
        let (tx, rx) =
            std::os::unix::net::UnixDatagram::pair().expect("a socket pair for packet-out");
        let ports = Arc::new(crate::profiles::PortStatus::default());
        let _ = tx.set_nonblocking(true);
        let _ = rx.set_nonblocking(true);
        Arc::new(Device {
            device_id,
            pipeline: RwLock::new(None),
            arb: Mutex::new(Arbitration::default()),
            cpu_port,
            packet_out_tx: tx,
            packet_out_rx: rx,
            packet_in_dropped: std::sync::atomic::AtomicU64::new(0),
            saved: Mutex::new(None),
            digest_configs: Mutex::new(HashMap::new()),
            next_list_id: std::sync::atomic::AtomicU64::new(1),
            digests_dropped: std::sync::atomic::AtomicU64::new(0),
            digests_deduplicated: std::sync::atomic::AtomicU64::new(0),
            digest_cache: Mutex::new(DigestCache::default()),
            profiles: Mutex::new(crate::profiles::Profiles::with_ports(ports.clone())),
            ports,
            externs,
            translate_maps: RwLock::new(Default::default()),
        })
    }

    /// A pipeline built from p4sec's program file (`program.json` from `p4sec compile`, as it is or
    /// wrapped in a `p4.tmp.P4DeviceConfig`) with this device's extern set: `p4info`, if given,
    /// must name only the program's tables; otherwise it is generated from the program. The one
    /// place a pipeline is built from a program file (start-up and SetForwardingPipelineConfig).
    pub fn build_pipeline(
        &self,
        device_config: Vec<u8>,
        p4info: Option<cfg::P4Info>,
        cookie: u64,
    ) -> Result<Pipeline, String> {
        let prog = crate::p4config::program(&device_config)?;
        if let Some(p4info) = &p4info {
            for t in &p4info.tables {
                let id = t.preamble.as_ref().map(|p| p.id).unwrap_or(0);
                if !prog.tables.iter().any(|x| x.id == id) {
                    return Err(format!(
                        "the p4info's table id {id} is not in the device config"
                    ));
                }
            }
        }
        if let Some(inst) = prog
            .externs
            .iter()
            .find(|i| !self.externs.iter().any(|t| t.name() == i.type_name))
        {
            let known: Vec<&str> = self.externs.iter().map(|t| t.name()).collect();
            return Err(format!(
                "extern `{}` (type `{}`) is not implemented by this switch (its extern types: {}; test externs are loaded by `p4sec stf` only)",
                inst.name,
                inst.type_name,
                known.join(", ")
            ));
        }
        let engine = Engine::new(Arc::new(prog), &self.externs)?;
        let p4info = p4info.unwrap_or_else(|| crate::p4info::p4info(&engine.prog));
        let translator = crate::translate::Translator::new(
            &engine.prog,
            &self
                .translate_maps
                .read()
                .unwrap_or_else(|p| p.into_inner()),
        )?
        .map(Arc::new);
        Ok(Pipeline {
            engine: Arc::new(engine),
            p4info,
            device_config,
            cookie,
            translator,
        })
    }

    /// The extern type named `name` in this device's extern set.
    pub(crate) fn extern_type(&self, name: &str) -> Option<&dyn ExternType> {
        self.externs
            .iter()
            .find(|t| t.name() == name)
            .map(|t| t.as_ref())
    }
    /// The data plane's report of a port's state (once a second per port). A change reaches the
    /// entries whose groups have members watching the port.
    pub fn set_port_up(&self, port: u32, up: bool) {
        if !self.ports.set(port, up) {
            return;
        }
        rtlog!(
            crate::log::Level::Debug,
            "port {port} is {}",
            if up { "up" } else { "down" }
        );
        let Some(engine) = self.engine() else { return };
        let mut profiles = self.profiles.lock().unwrap_or_else(|p| p.into_inner());
        let st = profiles.for_engine(&engine);
        if let Err(e) = crate::profiles::watch_changed(&engine, st, port) {
            rtlog!(
                crate::log::Level::Warn,
                "port {port}: the groups watching it could not be updated: {}",
                e.message()
            );
        }
    }

    pub fn engine(&self) -> Option<Arc<Engine>> {
        self.pipeline
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|p| p.engine.clone())
    }

    /// A frame the pipeline sent to the CPU port: strip the `packet_in` controller header (if the
    /// program has one) into metadata and hand it to the primary controller.
    pub fn packet_in(&self, engine: &Engine, frame: &[u8]) {
        let mut metadata = vec![];
        let mut payload = frame;
        if let Some(h) = engine
            .prog
            .controller_headers
            .iter()
            .find(|h| h.name == "packet_in")
        {
            let bits: u32 = h.fields.iter().map(|f| f.2).sum();
            let n = bits.div_ceil(8) as usize;
            if frame.len() < n {
                self.packet_in_dropped
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return;
            }
            let mut pos = 0usize;
            for (_, id, w) in &h.fields {
                let v = read_field(&frame[..n], pos, *w);
                metadata.push(p4::PacketMetadata {
                    metadata_id: *id,
                    value: value_to_bytes(&v),
                });
                pos += *w as usize;
            }
            payload = &frame[n..];
        }
        let translator = self
            .pipeline
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .and_then(|p| p.translator.clone());
        if let Some(tr) = translator {
            tr.packet_in(&mut metadata);
        }
        let msg = p4::StreamMessageResponse {
            update: Some(p4::stream_message_response::Update::Packet(p4::PacketIn {
                payload: payload.to_vec(),
                metadata,
            })),
        };
        let a = self.arb.lock().unwrap_or_else(|p| p.into_inner());
        let primary = a.primary();
        let sent = a
            .controllers
            .values()
            .find(|c| Some(c.election_id) == primary)
            .map(|c| c.tx.try_send(Ok(msg)).is_ok())
            .unwrap_or(false);
        if !sent {
            self.packet_in_dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

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

    /// Tell the primary controller about entries that were not hit for their idle timeout
    /// (IdleTimeoutNotification), once per idle period: an entry is reported again only after a new
    /// hit and another idle timeout. Without a primary controller nothing is reported (nor marked
    /// as reported).
    pub fn check_idle(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        let Some(pl) = self
            .pipeline
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        else {
            return;
        };
        let prog = &pl.engine.prog;
        if !prog.tables.iter().any(|t| t.support_timeout) {
            return;
        }
        let tx = {
            let a = self.arb.lock().unwrap_or_else(|p| p.into_inner());
            let primary = a.primary();
            a.controllers
                .values()
                .find(|c| Some(c.election_id) == primary)
                .map(|c| c.tx.clone())
        };
        let Some(tx) = tx else { return };
        let now = p4sec_engine::coarse_ms();
        let mut entries = vec![];
        let mut told = vec![];
        for (ti, t) in prog
            .tables
            .iter()
            .enumerate()
            .filter(|(_, t)| t.support_timeout)
        {
            let Ok(snap) = pl.engine.table_snapshot(ti) else {
                continue;
            };
            for x in &snap.entries {
                if x.idle_timeout_ns == 0 {
                    continue;
                }
                let last = x.last_hit.load(Relaxed);
                if now.saturating_sub(last).saturating_mul(1_000_000) < x.idle_timeout_ns
                    || x.idle_notified.load(Relaxed) == last
                {
                    continue;
                }
                let mut pe = from_entry(prog, t, &x.entry, 0, 0);
                pe.action = None;
                pe.counter_data = None;
                pe.idle_timeout_ns = x.idle_timeout_ns as i64;
                entries.push(pe);
                told.push((x.clone(), last));
            }
        }
        if entries.is_empty() {
            return;
        }
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0);
        let msg = p4::StreamMessageResponse {
            update: Some(
                p4::stream_message_response::Update::IdleTimeoutNotification(
                    p4::IdleTimeoutNotification {
                        table_entry: entries,
                        timestamp,
                    },
                ),
            ),
        };
        if tx.try_send(Ok(msg)).is_ok() {
            for (x, last) in told {
                x.idle_notified.store(last, Relaxed);
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
                    .clone()
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

    /// Encode a PacketOut (the `packet_out` controller header from its metadata, then the payload)
    /// and queue it for the data plane.
    pub(crate) fn packet_out(&self, prog: &Program, po: &p4::PacketOut) -> Result<(), Status> {
        let mut frame = vec![];
        if let Some(h) = prog
            .controller_headers
            .iter()
            .find(|h| h.name == "packet_out")
        {
            let bits: u32 = h.fields.iter().map(|f| f.2).sum();
            let mut hdr = vec![0u8; bits.div_ceil(8) as usize];
            let mut pos = 0usize;
            for (name, id, w) in &h.fields {
                let m = po
                    .metadata
                    .iter()
                    .find(|m| m.metadata_id == *id)
                    .ok_or_else(|| {
                        Status::invalid_argument(format!(
                            "packet-out metadata `{name}` (id {id}) is missing"
                        ))
                    })?;
                let v = bytes_to_value(&m.value, *w, name)?;
                write_field(&mut hdr, pos, *w, &v);
                pos += *w as usize;
            }
            if let Some(m) = po
                .metadata
                .iter()
                .find(|m| !h.fields.iter().any(|f| f.1 == m.metadata_id))
            {
                return Err(Status::invalid_argument(format!(
                    "packet-out metadata id {} is not in the packet_out header",
                    m.metadata_id
                )));
            }
            frame.extend_from_slice(&hdr);
        }
        frame.extend_from_slice(&po.payload);
        self.packet_out_tx
            .send(&frame)
            .map(|_| ())
            .map_err(|e| Status::resource_exhausted(format!("packet-out queue: {e}")))
    }
}

/// The data path's view of its control plane (the switch's seam, `p4sec_switch::control_plane`).
impl p4sec_switch::control_plane::ControlPlane for Device {
    fn engine(&self) -> Option<Arc<Engine>> {
        Device::engine(self)
    }
    fn cpu_port(&self) -> Option<u32> {
        self.cpu_port
    }
    fn packet_in(&self, engine: &Engine, frame: &[u8]) {
        Device::packet_in(self, engine, frame)
    }
    fn packet_out(&self) -> &std::os::unix::net::UnixDatagram {
        &self.packet_out_rx
    }
    fn set_port_up(&self, port: u32, up: bool) {
        Device::set_port_up(self, port, up)
    }
    fn deliver_digests(&self, engine: &Engine) {
        Device::deliver_digests(self, engine)
    }
    fn dropped(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.packet_in_dropped.load(Relaxed),
            self.digests_dropped.load(Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `p4sec switch` builds pipelines with the production extern set: a program that needs a test
    /// extern gets an error naming the extern, the switch's extern types, and where test externs
    /// are loaded.
    #[test]
    fn a_test_extern_is_refused_with_a_precise_error() {
        let src = "#include <core.p4>\n#include <v1model.p4>\nextern void extern_func(out bit<32> d, bit<32> s);\n\
            header h_t { bit<32> a; bit<32> b; }\nstruct H { h_t h; }\nstruct M {}\n\
            parser P(packet_in p, out H h, inout M m, inout standard_metadata_t s) { state start { p.extract(h.h); transition accept; } }\n\
            control V(inout H h, inout M m) { apply {} }\n\
            control I(inout H h, inout M m, inout standard_metadata_t s) { apply { extern_func(h.h.a, h.h.b); } }\n\
            control E(inout H h, inout M m, inout standard_metadata_t s) { apply {} }\n\
            control C(inout H h, inout M m) { apply {} }\n\
            control D(packet_out p, in H h) { apply { p.emit(h.h); } }\n\
            V1Switch(P(), V(), I(), E(), C(), D()) main;\n";
        let prog = p4sec_frontend::compile_str("t.p4", src, &Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            prog.externs.iter().any(|e| e.type_name == "extern_func"),
            "the program instantiates the test extern"
        );
        let device = Device::new(1, None, p4sec_externs::p4::registry());
        let e = device
            .build_pipeline(prog.to_json().into_bytes(), None, 0)
            .map(|_| ())
            .unwrap_err();
        assert!(
            e.contains("extern `extern_func`")
                && e.contains("esp_sad")
                && e.contains("`p4sec stf` only"),
            "{e}"
        );
        // with the extern in the device's set, the same program loads, its P4Info generated
        let mut externs = p4sec_externs::p4::registry();
        externs.extend(p4sec_engine::test_externs::registry());
        let device = Device::new(1, None, externs);
        let pl = device
            .build_pipeline(prog.to_json().into_bytes(), None, 7)
            .unwrap();
        assert_eq!(pl.cookie, 7);
        assert_eq!(
            pl.p4info,
            crate::p4info::p4info(&pl.engine.prog),
            "the P4Info is generated from the program"
        );
    }

    /// A P4Info naming a table the program does not have is refused.
    #[test]
    fn a_p4info_for_another_program_is_refused() {
        let prog = p4sec_frontend::compile_str(
            "g.p4",
            include_str!("../../../programs/ipsec_gateway.p4"),
            &Default::default(),
        )
        .unwrap();
        let device = Device::new(1, None, p4sec_externs::p4::registry());
        let mut info = crate::p4info::p4info(&prog);
        assert!(device
            .build_pipeline(prog.to_json().into_bytes(), Some(info.clone()), 0)
            .is_ok());
        info.tables[0].preamble.as_mut().unwrap().id = 0x0200_0000 | 0xfff_fff;
        let e = device
            .build_pipeline(prog.to_json().into_bytes(), Some(info), 0)
            .map(|_| ())
            .unwrap_err();
        assert!(e.contains("is not in the device config"), "{e}");
    }
}
