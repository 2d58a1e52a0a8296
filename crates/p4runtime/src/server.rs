//! The `p4.v1.P4Runtime` service over a p4sec engine: pipeline configuration, table writes and reads,
//! and primary arbitration on the stream channel.

use crate::profiles::ProfileState;
use crate::proto::google::rpc;
use crate::proto::p4::config::v1 as cfg;
use crate::proto::p4::v1 as p4;
use p4sec_engine::meters::MeterRates;
use p4sec_engine::tables::TableData;
use p4sec_engine::Engine;
use p4sec_ir::{ActionCall, FieldMatch, MatchKind, Program, Table, TableEntry, Value};
use prost::Message;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Code, Request, Response, Status};

/// The forwarding pipeline installed on the device.
pub struct Pipeline {
    pub engine: Arc<Engine>,
    pub p4info: cfg::P4Info,
    pub device_config: Vec<u8>,
    pub cookie: u64,
}

struct Controller {
    election_id: u128,
    tx: mpsc::Sender<Result<p4::StreamMessageResponse, Status>>,
    /// The client's address (for the log).
    peer: String,
}

#[derive(Default)]
struct Arbitration {
    next: u64,
    controllers: HashMap<u64, Controller>,
}

impl Arbitration {
    fn primary(&self) -> Option<u128> {
        self.controllers.values().map(|c| c.election_id).max()
    }
    /// The primary controller's election id and address.
    fn primary_info(&self) -> Option<(u128, String)> {
        self.controllers.values().max_by_key(|c| c.election_id).map(|c| (c.election_id, c.peer.clone()))
    }
}

/// Log a change of primary controller (from `before` to `after`, as (election id, address)).
fn log_primary_change(device_id: u64, before: &Option<(u128, String)>, after: &Option<(u128, String)>) {
    if before == after {
        return;
    }
    if let Some((id, peer)) = before {
        rtlog!(crate::log::Level::Info, "P4Runtime: device {device_id}: {peer} (election id {id}) lost primary");
    }
    match after {
        Some((id, peer)) => rtlog!(crate::log::Level::Info, "P4Runtime: device {device_id}: {peer} (election id {id}) is now the primary controller"),
        None => rtlog!(crate::log::Level::Info, "P4Runtime: device {device_id}: no primary controller"),
    }
}

/// One P4Runtime device.
pub struct Device {
    pub device_id: u64,
    pub pipeline: RwLock<Option<Arc<Pipeline>>>,
    arb: Mutex<Arbitration>,
    /// The CPU port: frames the pipeline sends there go to the primary controller as PacketIn, and
    /// PacketOut frames enter the pipeline as received on it.
    pub cpu_port: Option<u32>,
    /// PacketOut frames (controller header already prepended) on their way to the data plane: one datagram
    /// per frame; the packet loop polls `packet_out_rx`.
    packet_out_tx: std::os::unix::net::UnixDatagram,
    pub packet_out_rx: std::os::unix::net::UnixDatagram,
    /// PacketIn messages that could not be delivered (no primary controller, or its queue was full).
    pub packet_in_dropped: std::sync::atomic::AtomicU64,
    /// A pipeline saved by VERIFY_AND_SAVE, waiting for COMMIT.
    saved: Mutex<Option<Arc<Pipeline>>>,
    /// Digests the controller asked for (DigestEntry writes): digest id → configuration.
    digest_configs: Mutex<HashMap<u32, p4::digest_entry::Config>>,
    next_list_id: std::sync::atomic::AtomicU64,
    /// Digest messages dropped: not enabled by the controller, or no primary controller to receive them.
    pub digests_dropped: std::sync::atomic::AtomicU64,
    /// Digest messages not sent because a digest list holding the same data waits for its acknowledgement.
    pub digests_deduplicated: std::sync::atomic::AtomicU64,
    digest_cache: Mutex<DigestCache>,
    /// Action profile members and groups of the installed pipeline.
    profiles: Mutex<crate::profiles::Profiles>,
    /// Port liveness reported by the data plane (watch ports of selector group members).
    ports: Arc<crate::profiles::PortStatus>,
}

/// Digest data sent to the controller and not acknowledged yet (the P4Runtime digest "cache"): the same
/// data is not sent again until its list is acknowledged or `ack_timeout_ns` has passed. At most
/// [`DIGEST_CACHE_MAX`] messages are held (the oldest lists go first: a duplicate is then possible, a loss
/// never).
#[derive(Default)]
struct DigestCache {
    /// Per digest id, its unacknowledged lists in the order they were sent: (list id, sent at, messages).
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
        let Some(q) = self.lists.get_mut(&digest_id) else { return };
        if let Some(i) = q.iter().position(|(l, _, _)| *l == list_id) {
            if let Some((_, _, msgs)) = q.remove(i) {
                self.forget(msgs);
            }
        }
    }
    /// Drop the lists of `digest_id` sent `ack_timeout` or longer ago.
    fn expire(&mut self, digest_id: u32, ack_timeout: std::time::Duration, now: std::time::Instant) {
        let Some(q) = self.lists.get_mut(&digest_id) else { return };
        let mut old = vec![];
        while q.front().is_some_and(|(_, t, _)| now.duration_since(*t) >= ack_timeout) {
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
            let Some((_, _, m)) = q.pop_front() else { break };
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
    pub fn new(device_id: u64) -> Arc<Device> {
        Device::with_cpu_port(device_id, None)
    }
    pub fn with_cpu_port(device_id: u64, cpu_port: Option<u32>) -> Arc<Device> {
        let (tx, rx) = std::os::unix::net::UnixDatagram::pair().expect("a socket pair for packet-out");
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
        })
    }
    /// The data plane's report of a port's state (once a second per port). A change reaches the entries
    /// whose groups have members watching the port.
    pub fn set_port_up(&self, port: u32, up: bool) {
        if !self.ports.set(port, up) {
            return;
        }
        rtlog!(crate::log::Level::Debug, "port {port} is {}", if up { "up" } else { "down" });
        let Some(engine) = self.engine() else { return };
        let mut profiles = self.profiles.lock().unwrap_or_else(|p| p.into_inner());
        let st = profiles.for_engine(&engine);
        if let Err(e) = crate::profiles::watch_changed(&engine, st, port) {
            rtlog!(crate::log::Level::Warn, "port {port}: the groups watching it could not be updated: {}", e.message());
        }
    }

    pub fn engine(&self) -> Option<Arc<Engine>> {
        self.pipeline.read().unwrap_or_else(|p| p.into_inner()).as_ref().map(|p| p.engine.clone())
    }

    /// A frame the pipeline sent to the CPU port: strip the `packet_in` controller header (if the program
    /// has one) into metadata and hand it to the primary controller.
    pub fn packet_in(&self, engine: &Engine, frame: &[u8]) {
        let mut metadata = vec![];
        let mut payload = frame;
        if let Some(h) = engine.prog.controller_headers.iter().find(|h| h.name == "packet_in") {
            let bits: u32 = h.fields.iter().map(|f| f.2).sum();
            let n = bits.div_ceil(8) as usize;
            if frame.len() < n {
                self.packet_in_dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return;
            }
            let mut pos = 0usize;
            for (_, id, w) in &h.fields {
                let v = read_field(&frame[..n], pos, *w);
                metadata.push(p4::PacketMetadata { metadata_id: *id, value: value_to_bytes(&v) });
                pos += *w as usize;
            }
            payload = &frame[n..];
        }
        let msg = p4::StreamMessageResponse { update: Some(p4::stream_message_response::Update::Packet(p4::PacketIn { payload: payload.to_vec(), metadata })) };
        let a = self.arb.lock().unwrap_or_else(|p| p.into_inner());
        let primary = a.primary();
        let sent = a.controllers.values().find(|c| Some(c.election_id) == primary).map(|c| c.tx.try_send(Ok(msg)).is_ok()).unwrap_or(false);
        if !sent {
            self.packet_in_dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Send the engine's pending digest messages to the primary controller as DigestList messages, for the
    /// digests it enabled (at most `max_list_size` messages per list when that is set). The messages of a
    /// list are distinct, and data still held by a list that waits for its acknowledgement (for at most
    /// `ack_timeout_ns`; 0 keeps nothing) is not sent again.
    pub fn deliver_digests(&self, engine: &Engine) {
        use std::sync::atomic::Ordering::Relaxed;
        if !engine.has_digests() {
            return;
        }
        let msgs = engine.drain_digests();
        let configs = self.digest_configs.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut cache = self.digest_cache.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        for (id, c) in &configs {
            cache.expire(*id, std::time::Duration::from_nanos(c.ack_timeout_ns.max(0) as u64), now);
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
            let members = vals.iter().map(|v| p4::P4Data { data: Some(p4::p4_data::Data::Bitstring(value_to_bytes(v))) }).collect();
            let data = p4::P4Data { data: Some(p4::p4_data::Data::Struct(p4::P4StructLike { members })) };
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
        let tx = a.controllers.values().find(|c| Some(c.election_id) == primary).map(|c| c.tx.clone());
        drop(a);
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0);
        for (id, max, list) in per {
            let keep = configs.get(&id).is_some_and(|c| c.ack_timeout_ns > 0);
            let chunk = if max > 0 { max as usize } else { list.len().max(1) };
            for part in list.chunks(chunk) {
                let list_id = self.next_list_id.fetch_add(1, Relaxed);
                let msg = p4::StreamMessageResponse {
                    update: Some(p4::stream_message_response::Update::Digest(p4::DigestList {
                        digest_id: id,
                        list_id,
                        data: part.iter().map(|(d, _)| d.clone()).collect(),
                        timestamp: stamp,
                    })),
                };
                if !tx.as_ref().map(|t| t.try_send(Ok(msg)).is_ok()).unwrap_or(false) {
                    self.digests_dropped.fetch_add(part.len() as u64, Relaxed);
                } else if keep {
                    cache.add(id, list_id, now, part.iter().map(|(_, k)| k.clone()).collect());
                }
            }
        }
    }

    /// Tell the primary controller about entries that were not hit for their idle timeout
    /// (IdleTimeoutNotification), once per idle period: an entry is reported again only after a new hit and
    /// another idle timeout. Without a primary controller nothing is reported (nor marked as reported).
    pub fn check_idle(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        let Some(pl) = self.pipeline.read().unwrap_or_else(|p| p.into_inner()).clone() else { return };
        let prog = &pl.engine.prog;
        if !prog.tables.iter().any(|t| t.support_timeout) {
            return;
        }
        let tx = {
            let a = self.arb.lock().unwrap_or_else(|p| p.into_inner());
            let primary = a.primary();
            a.controllers.values().find(|c| Some(c.election_id) == primary).map(|c| c.tx.clone())
        };
        let Some(tx) = tx else { return };
        let now = p4sec_engine::coarse_ms();
        let mut entries = vec![];
        let mut told = vec![];
        for (ti, t) in prog.tables.iter().enumerate().filter(|(_, t)| t.support_timeout) {
            let Ok(snap) = pl.engine.table_snapshot(ti) else { continue };
            for x in &snap.entries {
                if x.idle_timeout_ns == 0 {
                    continue;
                }
                let last = x.last_hit.load(Relaxed);
                if now.saturating_sub(last).saturating_mul(1_000_000) < x.idle_timeout_ns || x.idle_notified.load(Relaxed) == last {
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
        let timestamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0);
        let msg = p4::StreamMessageResponse {
            update: Some(p4::stream_message_response::Update::IdleTimeoutNotification(p4::IdleTimeoutNotification { table_entry: entries, timestamp })),
        };
        if tx.try_send(Ok(msg)).is_ok() {
            for (x, last) in told {
                x.idle_notified.store(last, Relaxed);
            }
        }
    }

    /// A DigestListAck from the primary controller: the list's data may be sent again.
    fn digest_ack(&self, ack: &p4::DigestListAck) {
        self.digest_cache.lock().unwrap_or_else(|p| p.into_inner()).remove_list(ack.digest_id, ack.list_id);
    }

    fn digest_cache_clear(&self) {
        self.digest_cache.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    fn write_digest_entry(&self, prog: &Program, ty: p4::update::Type, d: &p4::DigestEntry) -> Result<(), Status> {
        use p4::update::Type as T;
        if !prog.digests.iter().any(|x| x.id == d.digest_id) {
            return Err(Status::not_found(format!("no digest with id {}", d.digest_id)));
        }
        let mut c = self.digest_configs.lock().unwrap_or_else(|p| p.into_inner());
        let exists = c.contains_key(&d.digest_id);
        match ty {
            T::Insert if exists => Err(Status::already_exists(format!("digest {} is already enabled", d.digest_id))),
            T::Modify | T::Delete if !exists => Err(Status::not_found(format!("digest {} is not enabled", d.digest_id))),
            T::Delete => {
                c.remove(&d.digest_id);
                self.digest_cache_clear();
                Ok(())
            }
            T::Insert | T::Modify => {
                let cfg = d.config.clone().ok_or_else(|| Status::invalid_argument("digest entry without a config"))?;
                if cfg.max_list_size < 0 || cfg.max_timeout_ns < 0 || cfg.ack_timeout_ns < 0 {
                    return Err(Status::invalid_argument("digest configuration values cannot be negative"));
                }
                c.insert(d.digest_id, cfg);
                self.digest_cache_clear();
                Ok(())
            }
            T::Unspecified => Err(Status::invalid_argument("unspecified update type")),
        }
    }

    fn read_digest_entries(&self, d: &p4::DigestEntry, out: &mut Vec<p4::Entity>) {
        let c = self.digest_configs.lock().unwrap_or_else(|p| p.into_inner());
        let mut ids: Vec<&u32> = c.keys().collect();
        ids.sort();
        for id in ids {
            if d.digest_id == 0 || *id == d.digest_id {
                out.push(p4::Entity { entity: Some(p4::entity::Entity::DigestEntry(p4::DigestEntry { digest_id: *id, config: c.get(id).cloned() })) });
            }
        }
    }

    /// Encode a PacketOut (the `packet_out` controller header from its metadata, then the payload) and queue
    /// it for the data plane.
    fn packet_out(&self, prog: &Program, po: &p4::PacketOut) -> Result<(), Status> {
        let mut frame = vec![];
        if let Some(h) = prog.controller_headers.iter().find(|h| h.name == "packet_out") {
            let bits: u32 = h.fields.iter().map(|f| f.2).sum();
            let mut hdr = vec![0u8; bits.div_ceil(8) as usize];
            let mut pos = 0usize;
            for (name, id, w) in &h.fields {
                let m = po
                    .metadata
                    .iter()
                    .find(|m| m.metadata_id == *id)
                    .ok_or_else(|| Status::invalid_argument(format!("packet-out metadata `{name}` (id {id}) is missing")))?;
                let v = bytes_to_value(&m.value, *w, name)?;
                write_field(&mut hdr, pos, *w, &v);
                pos += *w as usize;
            }
            if let Some(m) = po.metadata.iter().find(|m| !h.fields.iter().any(|f| f.1 == m.metadata_id)) {
                return Err(Status::invalid_argument(format!("packet-out metadata id {} is not in the packet_out header", m.metadata_id)));
            }
            frame.extend_from_slice(&hdr);
        }
        frame.extend_from_slice(&po.payload);
        self.packet_out_tx.send(&frame).map(|_| ()).map_err(|e| Status::resource_exhausted(format!("packet-out queue: {e}")))
    }
}

/// Bits `[pos, pos + width)` of `b` (MSB first) as a value.
fn read_field(b: &[u8], pos: usize, width: u32) -> Value {
    let n = p4sec_ir::words_for(width) as usize;
    let mut words = vec![0u64; n];
    for i in 0..width as usize {
        let bit = (b[(pos + i) / 8] >> (7 - (pos + i) % 8)) & 1;
        let k = width as usize - 1 - i; // bit index from the least significant end
        words[k / 64] |= (bit as u64) << (k % 64);
    }
    Value { width, words }
}

/// Write `v` into bits `[pos, pos + width)` of `b` (MSB first).
fn write_field(b: &mut [u8], pos: usize, width: u32, v: &Value) {
    for i in 0..width as usize {
        let k = width as usize - 1 - i;
        let bit = (v.words.get(k / 64).copied().unwrap_or(0) >> (k % 64)) & 1;
        if bit == 1 {
            b[(pos + i) / 8] |= 0x80 >> ((pos + i) % 8);
        }
    }
}

fn eid(e: &Option<p4::Uint128>) -> u128 {
    e.as_ref().map(|e| ((e.high as u128) << 64) | e.low as u128).unwrap_or(0)
}

fn to_uint128(v: u128) -> p4::Uint128 {
    p4::Uint128 { high: (v >> 64) as u64, low: v as u64 }
}

/// P4Runtime byte string → value of `width` bits (canonical or zero-padded; must fit).
pub(crate) fn bytes_to_value(b: &[u8], width: u32, what: &str) -> Result<Value, Status> {
    let first = b.iter().position(|x| *x != 0).unwrap_or(b.len());
    let sig = &b[first..];
    let bits = if sig.is_empty() { 0 } else { (sig.len() as u32 - 1) * 8 + (8 - sig[0].leading_zeros()) };
    if bits > width {
        return Err(Status::invalid_argument(format!("{what}: the value has {bits} significant bits, the field has {width}")));
    }
    let n = p4sec_ir::words_for(width) as usize;
    let mut words = vec![0u64; n];
    for (i, byte) in sig.iter().rev().enumerate() {
        words[i / 8] |= (*byte as u64) << (8 * (i % 8));
    }
    Ok(Value { width, words })
}

/// Value → canonical byte string (no leading zero bytes; zero is one zero byte).
pub(crate) fn value_to_bytes(v: &Value) -> Vec<u8> {
    let mut out = vec![];
    for w in v.words.iter().rev() {
        out.extend_from_slice(&w.to_be_bytes());
    }
    let first = out.iter().position(|x| *x != 0).unwrap_or(out.len() - 1);
    out[first..].to_vec()
}

fn table_of<'a>(prog: &'a Program, id: u32) -> Result<(usize, &'a Table), Status> {
    prog.tables.iter().enumerate().find(|(_, t)| t.id == id).ok_or_else(|| Status::not_found(format!("no table with id {id}")))
}

pub(crate) fn action_call(prog: &Program, t: &Table, a: &p4::Action, default: bool) -> Result<ActionCall, Status> {
    let ta = t
        .actions
        .iter()
        .find(|x| prog.actions[x.action as usize].id == a.action_id)
        .ok_or_else(|| Status::invalid_argument(format!("action id {} is not an action of table `{}`", a.action_id, t.name)))?;
    if ta.default_only && !default {
        return Err(Status::invalid_argument(format!("action `{}` is default-only in `{}`", prog.actions[ta.action as usize].name, t.name)));
    }
    let act = &prog.actions[ta.action as usize];
    if a.params.len() != act.params.len() {
        return Err(Status::invalid_argument(format!("action `{}` takes {} parameters, {} given", act.name, act.params.len(), a.params.len())));
    }
    let mut args = vec![];
    for p in &act.params {
        let given =
            a.params.iter().find(|x| x.param_id == p.id).ok_or_else(|| Status::invalid_argument(format!("missing parameter `{}` (id {})", p.name, p.id)))?;
        args.push(bytes_to_value(&given.value, p.loc.width, &format!("parameter `{}`", p.name))?);
    }
    Ok(ActionCall { action: ta.action, args })
}

pub(crate) fn to_entry(prog: &Program, t: &Table, e: &p4::TableEntry) -> Result<TableEntry, Status> {
    to_entry_with(prog, t, e, true)
}

/// The match part of a table entry (for entities that name an entry: direct counters and meters); the
/// action, if any, is ignored and the table's default action stands in.
pub(crate) fn to_match(prog: &Program, t: &Table, e: &p4::TableEntry) -> Result<TableEntry, Status> {
    to_entry_with(prog, t, e, false)
}

fn to_entry_with(prog: &Program, t: &Table, e: &p4::TableEntry, want_action: bool) -> Result<TableEntry, Status> {
    use p4::field_match::FieldMatchType as M;
    let mut matches = vec![];
    for k in &t.keys {
        let given = e.r#match.iter().find(|m| m.field_id == k.id);
        let m = match (given.and_then(|g| g.field_match_type.as_ref()), k.kind) {
            (None, MatchKind::Exact) => return Err(Status::invalid_argument(format!("exact field `{}` (id {}) is missing", k.name, k.id))),
            (None, _) => FieldMatch::Any,
            (Some(M::Exact(x)), MatchKind::Exact | MatchKind::Selector) => FieldMatch::Exact(bytes_to_value(&x.value, k.width, &k.name)?),
            (Some(M::Ternary(x)), MatchKind::Ternary) => {
                let value = bytes_to_value(&x.value, k.width, &k.name)?;
                let mask = bytes_to_value(&x.mask, k.width, &k.name)?;
                if value.words.iter().zip(&mask.words).any(|(v, m)| v & !m != 0) {
                    return Err(Status::invalid_argument(format!("ternary field `{}`: value has bits outside the mask", k.name)));
                }
                FieldMatch::Ternary { value, mask }
            }
            (Some(M::Lpm(x)), MatchKind::Lpm) => {
                if x.prefix_len < 0 || x.prefix_len as u32 > k.width {
                    return Err(Status::invalid_argument(format!("lpm field `{}`: prefix length {} out of range", k.name, x.prefix_len)));
                }
                FieldMatch::Lpm { value: bytes_to_value(&x.value, k.width, &k.name)?, prefix_len: x.prefix_len as u32 }
            }
            (Some(M::Range(x)), MatchKind::Range) => {
                FieldMatch::Range { lo: bytes_to_value(&x.low, k.width, &k.name)?, hi: bytes_to_value(&x.high, k.width, &k.name)? }
            }
            (Some(M::Optional(x)), MatchKind::Optional) => FieldMatch::Optional(Some(bytes_to_value(&x.value, k.width, &k.name)?)),
            (Some(_), kind) => return Err(Status::invalid_argument(format!("field `{}` is matched as {kind:?}", k.name))),
        };
        matches.push(m);
    }
    for m in &e.r#match {
        if !t.keys.iter().any(|k| k.id == m.field_id) {
            return Err(Status::invalid_argument(format!("table `{}` has no match field id {}", t.name, m.field_id)));
        }
    }
    let needs_priority = t.keys.iter().any(|k| matches!(k.kind, MatchKind::Ternary | MatchKind::Range | MatchKind::Optional));
    if needs_priority && e.priority <= 0 {
        return Err(Status::invalid_argument(format!("table `{}` needs a positive priority", t.name)));
    }
    if !needs_priority && e.priority != 0 {
        return Err(Status::invalid_argument(format!("table `{}` has no ternary/range/optional field: priority must be 0", t.name)));
    }
    if !want_action {
        return Ok(TableEntry { matches, action: t.default_action.clone(), priority: e.priority });
    }
    let action = match e.action.as_ref().and_then(|a| a.r#type.as_ref()) {
        Some(p4::table_action::Type::Action(a)) => action_call(prog, t, a, false)?,
        Some(_) => {
            return Err(Status::invalid_argument(format!(
                "table `{}` has no action profile: its entries take an action, not a member, group or action set",
                t.name
            )))
        }
        None => return Err(Status::invalid_argument("the table entry has no action")),
    };
    Ok(TableEntry { matches, action, priority: e.priority })
}

/// The action of a default-entry MODIFY: the given action, or the program's default action when unset.
fn default_action(prog: &Program, t: &Table, te: &p4::TableEntry) -> Result<ActionCall, Status> {
    match te.action.as_ref().and_then(|a| a.r#type.as_ref()) {
        Some(p4::table_action::Type::Action(a)) => action_call(prog, t, a, true),
        Some(_) => Err(Status::unimplemented(format!("table `{}`: the default entry takes an action, not a member, group or action set", t.name))),
        None => Ok(t.default_action.clone()),
    }
}

/// An action call as a P4Runtime action.
pub(crate) fn action_to_p4(prog: &Program, a: &ActionCall) -> p4::Action {
    let act = &prog.actions[a.action as usize];
    let params = act.params.iter().zip(&a.args).map(|(p, v)| p4::action::Param { param_id: p.id, value: value_to_bytes(v) }).collect();
    p4::Action { action_id: act.id, params }
}

fn meter_rates(c: &p4::MeterConfig, what: &str) -> Result<MeterRates, Status> {
    if c.cir < 0 || c.cburst < 0 || c.pir < 0 || c.pburst < 0 {
        return Err(Status::invalid_argument(format!("{what}: meter rates and bursts cannot be negative")));
    }
    if c.pir < c.cir {
        return Err(Status::invalid_argument(format!("{what}: the peak rate ({}) is below the committed rate ({})", c.pir, c.cir)));
    }
    if c.eburst != 0 {
        return Err(Status::invalid_argument(format!("{what}: eburst is for single-rate meters; these are two-rate three-color meters")));
    }
    Ok(MeterRates { cir: c.cir as u64, cbs: c.cburst as u64, pir: c.pir as u64, pbs: c.pburst as u64 })
}

pub(crate) fn meter_config(r: &MeterRates) -> p4::MeterConfig {
    p4::MeterConfig { cir: r.cir as i64, cburst: r.cbs as i64, pir: r.pir as i64, pburst: r.pbs as i64, eburst: 0 }
}

/// A table-entry update checked against the table, ready for the engine. Entries of tables with an action
/// profile or selector keep their `TableAction` in `indirect`, resolved against the members and groups when
/// the update is applied (after the other updates of the batch); `entry.action` stands in until then.
struct EntryUpdate {
    ty: p4::update::Type,
    entry: TableEntry,
    indirect: Option<p4::table_action::Type>,
    /// The direct meter: INSERT, its initial configuration; MODIFY, `Some` (re)configures it (the
    /// specification resets it to the default when `meter_config` is unset), `None` keeps it.
    meter: Option<Option<MeterRates>>,
    /// The idle timeout (INSERT and MODIFY of entries of tables with `support_timeout`).
    idle: Option<u64>,
}

fn prepare_entry(prog: &Program, t: &Table, te: &p4::TableEntry, ty: p4::update::Type) -> Result<EntryUpdate, Status> {
    use p4::update::Type as T;
    if ty == T::Unspecified {
        return Err(Status::invalid_argument("unspecified update type"));
    }
    let ta = te.action.as_ref().and_then(|a| a.r#type.as_ref());
    let indirect_table = t.implementation != p4sec_ir::Implementation::None;
    if ty == T::Delete {
        let entry = if indirect_table || !matches!(ta, Some(p4::table_action::Type::Action(_))) { to_match(prog, t, te)? } else { to_entry(prog, t, te)? };
        return Ok(EntryUpdate { ty, entry, indirect: None, meter: None, idle: None });
    }
    if te.idle_timeout_ns < 0 {
        return Err(Status::invalid_argument(format!("table `{}`: idle_timeout_ns cannot be negative", t.name)));
    }
    if te.idle_timeout_ns > 0 && !t.support_timeout {
        return Err(Status::invalid_argument(format!(
            "table `{}` does not support idle timeouts (no `support_timeout = true`): idle_timeout_ns must be 0",
            t.name
        )));
    }
    let idle = t.support_timeout.then_some(te.idle_timeout_ns as u64);
    if te.meter_counter_data.is_some() {
        return Err(Status::unimplemented("a table entry's meter_counter_data cannot be written: write its DirectMeterEntry"));
    }
    let rates = match (&te.meter_config, t.direct_meter) {
        (Some(_), None) => return Err(Status::invalid_argument(format!("table `{}` has no direct meter: meter_config must be unset", t.name))),
        (Some(c), Some(_)) => Some(meter_rates(c, &t.name)?),
        (None, _) => None,
    };
    let meter = match ty {
        T::Insert => Some(rates),
        _ if t.direct_meter.is_some() => Some(rates),
        _ => None,
    };
    if indirect_table {
        let ta = ta.cloned().ok_or_else(|| Status::invalid_argument("the table entry has no action"))?;
        return Ok(EntryUpdate { ty, entry: to_match(prog, t, te)?, indirect: Some(ta), meter, idle });
    }
    let e = to_entry(prog, t, te)?;
    p4sec_engine::tables::validate_entry(prog, t, &e).map_err(Status::invalid_argument)?;
    Ok(EntryUpdate { ty, entry: e, indirect: None, meter, idle })
}

/// Apply a prepared table-entry update to a table version (resolving its action profile reference).
fn apply_entry(prog: &Program, t: &Table, d: &mut TableData, st: &ProfileState, u: EntryUpdate) -> Result<(), Status> {
    use p4::update::Type as T;
    let (entry, ind) = match &u.indirect {
        Some(ta) => {
            let (action, ind) = crate::profiles::entry_action(prog, t, st, ta)?;
            (TableEntry { action, ..u.entry }, ind)
        }
        None => (u.entry, None),
    };
    let key = u.idle.map(|ns| (ns, entry.clone()));
    match u.ty {
        T::Insert => d.insert_with(t, entry, ind, u.meter.flatten()),
        T::Modify => d.modify_with(t, entry, ind, u.meter),
        _ => d.delete(t, &entry).map(|_| ()),
    }
    .map_err(table_error)?;
    match (key, u.ty) {
        (Some((ns, e)), T::Insert | T::Modify) => d.set_idle_timeout(t, &e, ns).map_err(table_error),
        _ => Ok(()),
    }
}

pub(crate) fn from_entry(prog: &Program, t: &Table, e: &TableEntry, packets: u64, bytes: u64) -> p4::TableEntry {
    use p4::field_match::FieldMatchType as M;
    let mut ms = vec![];
    for (k, m) in t.keys.iter().zip(&e.matches) {
        let fm = match m {
            FieldMatch::Any => continue,
            FieldMatch::Exact(v) => M::Exact(p4::field_match::Exact { value: value_to_bytes(v) }),
            FieldMatch::Ternary { value, mask } => M::Ternary(p4::field_match::Ternary { value: value_to_bytes(value), mask: value_to_bytes(mask) }),
            FieldMatch::Lpm { value, prefix_len } => M::Lpm(p4::field_match::Lpm { value: value_to_bytes(value), prefix_len: *prefix_len as i32 }),
            FieldMatch::Range { lo, hi } => M::Range(p4::field_match::Range { low: value_to_bytes(lo), high: value_to_bytes(hi) }),
            FieldMatch::Optional(Some(v)) => M::Optional(p4::field_match::Optional { value: value_to_bytes(v) }),
            FieldMatch::Optional(None) => continue,
        };
        ms.push(p4::FieldMatch { field_id: k.id, field_match_type: Some(fm) });
    }
    p4::TableEntry {
        table_id: t.id,
        r#match: ms,
        action: Some(p4::TableAction { r#type: Some(p4::table_action::Type::Action(action_to_p4(prog, &e.action))) }),
        priority: e.priority,
        counter_data: t.direct_counter.map(|_| p4::CounterData { byte_count: bytes as i64, packet_count: packets as i64 }),
        ..Default::default()
    }
}

/// The gRPC status for an engine table error.
fn table_error(m: String) -> Status {
    if m.contains("already exists") {
        Status::already_exists(m)
    } else if m.contains("no entry") {
        Status::not_found(m)
    } else if m.contains("is full") {
        Status::resource_exhausted(m)
    } else {
        Status::invalid_argument(m)
    }
}

/// The gRPC service.
pub struct Service {
    pub device: Arc<Device>,
}

fn p4error(s: &Status) -> p4::Error {
    p4::Error { canonical_code: s.code() as i32, message: s.message().to_string(), space: String::new(), code: 0, details: None }
}

type StreamOut<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

impl Service {
    fn check_device(&self, id: u64) -> Result<(), Status> {
        if id != self.device.device_id {
            return Err(Status::not_found(format!("no device with id {id} (this is device {})", self.device.device_id)));
        }
        Ok(())
    }
    fn check_primary(&self, election: &Option<p4::Uint128>) -> Result<(), Status> {
        let arb = self.device.arb.lock().unwrap_or_else(|p| p.into_inner());
        match arb.primary() {
            Some(p) if p == eid(election) => Ok(()),
            Some(_) => Err(Status::permission_denied("this client is not the primary controller")),
            None => Err(Status::permission_denied("no controller has arbitrated on the stream channel")),
        }
    }
    fn pipeline(&self) -> Result<Arc<Pipeline>, Status> {
        self.device
            .pipeline
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| Status::failed_precondition("no forwarding pipeline is configured"))
    }

    fn apply_update(&self, pl: &Pipeline, st: &mut ProfileState, u: &p4::Update) -> Result<(), Status> {
        let prog = &pl.engine.prog;
        let ty = p4::update::Type::try_from(u.r#type).unwrap_or(p4::update::Type::Unspecified);
        let entity = u.entity.as_ref().and_then(|e| e.entity.as_ref()).ok_or_else(|| Status::invalid_argument("update without an entity"))?;
        match entity {
            p4::entity::Entity::TableEntry(te) => {
                let (ti, t) = table_of(prog, te.table_id)?;
                if te.is_default_action {
                    if ty != p4::update::Type::Modify {
                        return Err(Status::invalid_argument("the default entry can only be modified"));
                    }
                    let a = default_action(prog, t, te)?;
                    return pl.engine.table_set_default(ti, a).map_err(Status::invalid_argument);
                }
                // other table entries are applied in per-table batches by `write`
                Err(Status::invalid_argument("unspecified update type"))
            }
            p4::entity::Entity::ExternEntry(x) => {
                // p4sec externs: the entry is an Any whose type_url names the control operation
                // (e.g. "p4sec/esp_sad.add_sa") and whose value is its JSON argument
                let inst = prog
                    .externs
                    .iter()
                    .find(|e| p4sec_ir::p4info::extern_id(&e.name) == x.extern_id)
                    .ok_or_else(|| Status::not_found(format!("no extern instance with id {}", x.extern_id)))?;
                let any = x.entry.as_ref().ok_or_else(|| Status::invalid_argument("extern entry without a value"))?;
                let op = any.type_url.rsplit('.').next().unwrap_or("");
                let op = match (ty, op) {
                    (p4::update::Type::Delete, "add_sa") => "del_sa",
                    (_, op) => op,
                };
                pl.engine.extern_control(&inst.name, op, &any.value).map(|_| ()).map_err(Status::invalid_argument)
            }
            p4::entity::Entity::RegisterEntry(r) => crate::entities::write_register(&pl.engine, ty, r),
            p4::entity::Entity::CounterEntry(c) => crate::entities::write_counter(&pl.engine, ty, c),
            p4::entity::Entity::MeterEntry(m) => crate::entities::write_meter(&pl.engine, ty, m),
            p4::entity::Entity::PacketReplicationEngineEntry(p) => crate::entities::write_pre(&pl.engine, ty, p),
            p4::entity::Entity::DigestEntry(d) => self.device.write_digest_entry(prog, ty, d),
            p4::entity::Entity::DirectCounterEntry(d) => crate::entities::write_direct_counter(&pl.engine, ty, d),
            p4::entity::Entity::ValueSetEntry(v) => crate::entities::write_value_set(&pl.engine, ty, v),
            p4::entity::Entity::ActionProfileMember(m) => crate::profiles::write_member(&pl.engine, st, ty, m),
            p4::entity::Entity::ActionProfileGroup(g) => crate::profiles::write_group(&pl.engine, st, ty, g),
            p4::entity::Entity::DirectMeterEntry(d) => crate::entities::write_direct_meter(&pl.engine, ty, d),
        }
    }
}

#[tonic::async_trait]
impl p4::p4_runtime_server::P4Runtime for Service {
    async fn write(&self, req: Request<p4::WriteRequest>) -> Result<Response<p4::WriteResponse>, Status> {
        let r = req.into_inner();
        self.check_device(r.device_id)?;
        self.check_primary(&r.election_id)?;
        let pl = self.pipeline()?;
        let prog = pl.engine.prog.clone();
        let atomicity =
            p4::write_request::Atomicity::try_from(r.atomicity).map_err(|_| Status::invalid_argument(format!("unknown atomicity {}", r.atomicity)))?;
        // one write at a time: members, groups and the entries that use them change together
        let mut profiles = self.device.profiles.lock().unwrap_or_else(|p| p.into_inner());
        let st = profiles.for_engine(&pl.engine);
        if atomicity != p4::write_request::Atomicity::ContinueOnError {
            let results = write_atomic(&pl, st, &r.updates);
            return write_response(results.into_iter().map(Some).collect());
        }
        // Table entry updates are grouped per table and published as one new table version per table
        // (the engine's RCU write), after everything else, which is applied one by one (so entries see the
        // members and groups of the same batch). Results keep the update order.
        let mut results: Vec<Option<Result<(), Status>>> = (0..r.updates.len()).map(|_| None).collect();
        let mut per_table: HashMap<usize, Vec<(usize, EntryUpdate)>> = HashMap::new();
        for (i, u) in r.updates.iter().enumerate() {
            let ty = p4::update::Type::try_from(u.r#type).unwrap_or(p4::update::Type::Unspecified);
            if let Some(p4::entity::Entity::TableEntry(te)) = u.entity.as_ref().and_then(|e| e.entity.as_ref()) {
                if !te.is_default_action && ty != p4::update::Type::Unspecified {
                    let r = table_of(&prog, te.table_id).and_then(|(ti, t)| {
                        if t.entries_are_const {
                            return Err(Status::failed_precondition(format!("table `{}` has const entries", t.name)));
                        }
                        Ok((ti, prepare_entry(&prog, t, te, ty)?))
                    });
                    match r {
                        Ok((ti, e)) => per_table.entry(ti).or_default().push((i, e)),
                        Err(s) => results[i] = Some(Err(s)),
                    }
                    continue;
                }
            }
            results[i] = Some(self.apply_update(&pl, st, u));
        }
        let st = &*st;
        for (ti, ups) in per_table {
            let mut outcome: Vec<(usize, Result<(), Status>)> = vec![];
            let _ = pl.engine.table_update(ti, |t, d| {
                for (i, u) in ups {
                    outcome.push((i, apply_entry(&prog, t, d, st, u)));
                }
                Ok(())
            });
            for (i, r) in outcome {
                results[i] = Some(r);
            }
        }
        write_response(results)
    }

    type ReadStream = StreamOut<p4::ReadResponse>;

    async fn read(&self, req: Request<p4::ReadRequest>) -> Result<Response<Self::ReadStream>, Status> {
        let r = req.into_inner();
        self.check_device(r.device_id)?;
        let pl = self.pipeline()?;
        let prog = &pl.engine.prog;
        let mut out = vec![];
        for ent in &r.entities {
            match ent.entity.as_ref() {
                Some(p4::entity::Entity::TableEntry(te)) => {
                    let tables: Vec<usize> = if te.table_id == 0 { (0..prog.tables.len()).collect() } else { vec![table_of(prog, te.table_id)?.0] };
                    for ti in tables {
                        let t = &prog.tables[ti];
                        if te.is_default_action {
                            let d = pl.engine.table_default(ti).map_err(Status::internal)?;
                            let e = TableEntry { matches: vec![], action: d, priority: 0 };
                            let mut pe = from_entry(prog, &Table { keys: vec![], ..t.clone() }, &e, 0, 0);
                            pe.is_default_action = true;
                            out.push(p4::Entity { entity: Some(p4::entity::Entity::TableEntry(pe)) });
                            continue;
                        }
                        let snap = pl.engine.table_snapshot(ti).map_err(Status::internal)?;
                        for x in &snap.entries {
                            use std::sync::atomic::Ordering::Relaxed;
                            let mut pe = from_entry(prog, t, &x.entry, x.packets.load(Relaxed), x.bytes.load(Relaxed));
                            if let Some(ind) = &x.indirect {
                                pe.action = Some(crate::profiles::table_action_of(prog, ind));
                            }
                            if te.meter_config.is_some() && t.direct_meter.is_some() {
                                pe.meter_config = x.meter.as_ref().and_then(|m| m.rates()).map(|r| meter_config(&r));
                            }
                            if t.support_timeout {
                                pe.idle_timeout_ns = x.idle_timeout_ns as i64;
                                if te.time_since_last_hit.is_some() {
                                    let ms = p4sec_engine::coarse_ms().saturating_sub(x.last_hit.load(Relaxed));
                                    pe.time_since_last_hit = Some(p4::table_entry::IdleTimeout { elapsed_ns: (ms * 1_000_000) as i64 });
                                }
                            }
                            if te.meter_counter_data.is_some() && t.direct_meter.is_some() {
                                pe.meter_counter_data = Some(crate::entities::meter_counter_data(x.meter.as_ref().map(|m| m.counts()).unwrap_or_default()));
                            }
                            out.push(p4::Entity { entity: Some(p4::entity::Entity::TableEntry(pe)) });
                        }
                    }
                }
                Some(p4::entity::Entity::CounterEntry(ce)) => {
                    let cs: Vec<usize> =
                        prog.counters.iter().enumerate().filter(|(_, c)| ce.counter_id == 0 || c.id == ce.counter_id).map(|(i, _)| i).collect();
                    if cs.is_empty() {
                        return Err(Status::not_found(format!("no counter with id {}", ce.counter_id)));
                    }
                    for ci in cs {
                        let c = &prog.counters[ci];
                        let idx: Vec<u32> = match &ce.index {
                            Some(i) => vec![i.index as u32],
                            None => (0..c.size).collect(),
                        };
                        for i in idx {
                            let (p, b) = pl.engine.counter_read(ci, i as usize).map_err(Status::invalid_argument)?;
                            out.push(p4::Entity {
                                entity: Some(p4::entity::Entity::CounterEntry(p4::CounterEntry {
                                    counter_id: c.id,
                                    index: Some(p4::Index { index: i as i64 }),
                                    data: Some(p4::CounterData { byte_count: b as i64, packet_count: p as i64 }),
                                })),
                            });
                        }
                    }
                }
                Some(p4::entity::Entity::RegisterEntry(r)) => crate::entities::read_register(&pl.engine, r, &mut out)?,
                Some(p4::entity::Entity::MeterEntry(m)) => crate::entities::read_meter(&pl.engine, m, &mut out)?,
                Some(p4::entity::Entity::PacketReplicationEngineEntry(p)) => crate::entities::read_pre(&pl.engine, p, &mut out)?,
                Some(p4::entity::Entity::DigestEntry(d)) => self.device.read_digest_entries(d, &mut out),
                Some(p4::entity::Entity::DirectCounterEntry(d)) => crate::entities::read_direct_counters(&pl.engine, d, &mut out)?,
                Some(p4::entity::Entity::ValueSetEntry(v)) => crate::entities::read_value_set(&pl.engine, v, &mut out)?,
                Some(p4::entity::Entity::DirectMeterEntry(d)) => crate::entities::read_direct_meters(&pl.engine, d, &mut out)?,
                Some(p4::entity::Entity::ActionProfileMember(m)) => {
                    let mut profiles = self.device.profiles.lock().unwrap_or_else(|p| p.into_inner());
                    crate::profiles::read_members(prog, profiles.for_engine(&pl.engine), m, &mut out)?
                }
                Some(p4::entity::Entity::ActionProfileGroup(g)) => {
                    let mut profiles = self.device.profiles.lock().unwrap_or_else(|p| p.into_inner());
                    crate::profiles::read_groups(prog, profiles.for_engine(&pl.engine), g, &mut out)?
                }
                Some(p4::entity::Entity::ExternEntry(x)) => {
                    // p4sec externs: a query operation (read-only by name: `*_stats` or `get_*`) with its JSON
                    // argument in the entry's Any; the answer comes back as the JSON value of the same Any
                    let inst = prog
                        .externs
                        .iter()
                        .find(|e| p4sec_ir::p4info::extern_id(&e.name) == x.extern_id)
                        .ok_or_else(|| Status::not_found(format!("no extern instance with id {}", x.extern_id)))?;
                    let any = x.entry.as_ref().ok_or_else(|| Status::invalid_argument("extern entry without a query"))?;
                    let op = any.type_url.rsplit('.').next().unwrap_or("");
                    if !(op.ends_with("_stats") || op.starts_with("get_")) {
                        return Err(Status::invalid_argument(format!("`{op}` is not a query operation (reads take `*_stats` or `get_*`)")));
                    }
                    let value = pl.engine.extern_control(&inst.name, op, &any.value).map_err(Status::invalid_argument)?;
                    let mut e = x.clone();
                    e.entry = Some(prost_types::Any { type_url: any.type_url.clone(), value });
                    out.push(p4::Entity { entity: Some(p4::entity::Entity::ExternEntry(e)) });
                }
                _ => return Err(Status::unimplemented("this entity cannot be read yet")),
            }
        }
        let stream = tokio_stream::iter(vec![Ok(p4::ReadResponse { entities: out })]);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn set_forwarding_pipeline_config(
        &self,
        req: Request<p4::SetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4::SetForwardingPipelineConfigResponse>, Status> {
        let peer = req.remote_addr().map(|a| a.to_string()).unwrap_or_else(|| "a client".into());
        let r = req.into_inner();
        let (action, election) = (r.action, eid(&r.election_id));
        let name =
            p4::set_forwarding_pipeline_config_request::Action::try_from(action).map(|a| a.as_str_name().to_string()).unwrap_or_else(|_| action.to_string());
        let cookie = r.config.as_ref().and_then(|c| c.cookie.as_ref()).map(|c| c.cookie).unwrap_or(0);
        let res = self.set_pipeline(r);
        match &res {
            Ok(_) => rtlog!(
                crate::log::Level::Info,
                "P4Runtime: SetForwardingPipelineConfig {name} from {peer} (election id {election}, cookie {cookie}): done{}",
                match self.device.pipeline.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
                    Some(pl) => format!("; the pipeline has {} tables (cookie {})", pl.engine.prog.tables.len(), pl.cookie),
                    None => String::new(),
                }
            ),
            Err(e) => rtlog!(
                crate::log::Level::Info,
                "P4Runtime: SetForwardingPipelineConfig {name} from {peer} (election id {election}) failed: {:?}: {}",
                e.code(),
                e.message()
            ),
        }
        res
    }

    async fn get_forwarding_pipeline_config(
        &self,
        req: Request<p4::GetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4::GetForwardingPipelineConfigResponse>, Status> {
        let r = req.into_inner();
        self.check_device(r.device_id)?;
        let pl = self.pipeline()?;
        let config = p4::ForwardingPipelineConfig {
            p4info: Some(pl.p4info.clone()),
            p4_device_config: pl.device_config.clone(),
            cookie: Some(p4::forwarding_pipeline_config::Cookie { cookie: pl.cookie }),
        };
        Ok(Response::new(p4::GetForwardingPipelineConfigResponse { config: Some(config) }))
    }

    type StreamChannelStream = StreamOut<p4::StreamMessageResponse>;

    async fn stream_channel(&self, req: Request<tonic::Streaming<p4::StreamMessageRequest>>) -> Result<Response<Self::StreamChannelStream>, Status> {
        let peer = req.remote_addr().map(|a| a.to_string()).unwrap_or_else(|| "a client".into());
        let mut inbound = req.into_inner();
        let (tx, rx) = mpsc::channel(64);
        let device = self.device.clone();
        let conn = {
            let mut a = device.arb.lock().unwrap_or_else(|p| p.into_inner());
            a.next += 1;
            a.next
        };
        rtlog!(crate::log::Level::Info, "P4Runtime: stream channel opened by {peer}");
        tokio::spawn(async move {
            while let Some(msg) = inbound.next().await {
                let Ok(msg) = msg else { break };
                match msg.update {
                    Some(p4::stream_message_request::Update::Arbitration(arb)) => {
                        let id = eid(&arb.election_id);
                        let role = arb.role.as_ref().map(|r| r.name.clone()).filter(|n| !n.is_empty()).unwrap_or_else(|| "default".into());
                        if arb.device_id != device.device_id {
                            rtlog!(
                                crate::log::Level::Info,
                                "P4Runtime: {peer}: arbitration for device {} refused (this is device {})",
                                arb.device_id,
                                device.device_id
                            );
                            let _ = tx.send(Err(Status::not_found(format!("no device with id {}", arb.device_id)))).await;
                            continue;
                        }
                        let notify = {
                            let mut a = device.arb.lock().unwrap_or_else(|p| p.into_inner());
                            if a.controllers.iter().any(|(k, c)| *k != conn && c.election_id == id) {
                                rtlog!(crate::log::Level::Info, "P4Runtime: {peer}: arbitration refused: another controller uses election id {id}");
                                let _ = tx.try_send(Err(Status::invalid_argument("another controller uses this election id")));
                                continue;
                            }
                            let before = a.primary_info();
                            a.controllers.insert(conn, Controller { election_id: id, tx: tx.clone(), peer: peer.clone() });
                            let after = a.primary_info();
                            let primary = after.as_ref().is_some_and(|(p, _)| *p == id);
                            rtlog!(
                                crate::log::Level::Info,
                                "P4Runtime: {peer}: arbitration: device {}, election id {id}, role {role}: {}",
                                device.device_id,
                                if primary {
                                    "primary".to_string()
                                } else {
                                    format!("backup (the primary has election id {})", after.as_ref().map(|x| x.0).unwrap_or(0))
                                }
                            );
                            log_primary_change(device.device_id, &before, &after);
                            arbitration_messages(&a, device.device_id)
                        };
                        for (t, m) in notify {
                            let _ = t.send(Ok(m)).await;
                        }
                    }
                    Some(p4::stream_message_request::Update::Packet(po)) => {
                        let is_primary = {
                            let a = device.arb.lock().unwrap_or_else(|p| p.into_inner());
                            a.controllers.get(&conn).map(|c| Some(c.election_id) == a.primary()).unwrap_or(false)
                        };
                        let pl = device.pipeline.read().unwrap_or_else(|p| p.into_inner()).clone();
                        let r = match (is_primary, pl) {
                            (false, _) => Err(Status::permission_denied("only the primary controller may send packets")),
                            (_, None) => Err(Status::failed_precondition("no forwarding pipeline is configured")),
                            (true, Some(pl)) => device.packet_out(&pl.engine.prog, &po),
                        };
                        if let Err(st) = r {
                            let err = p4::StreamError {
                                canonical_code: st.code() as i32,
                                message: st.message().to_string(),
                                space: String::new(),
                                code: 0,
                                details: Some(p4::stream_error::Details::PacketOut(p4::PacketOutError { packet_out: Some(po) })),
                            };
                            let _ = tx.send(Ok(p4::StreamMessageResponse { update: Some(p4::stream_message_response::Update::Error(err)) })).await;
                        }
                    }
                    Some(p4::stream_message_request::Update::DigestAck(ack)) => {
                        let is_primary = {
                            let a = device.arb.lock().unwrap_or_else(|p| p.into_inner());
                            a.controllers.get(&conn).map(|c| Some(c.election_id) == a.primary()).unwrap_or(false)
                        };
                        if is_primary {
                            device.digest_ack(&ack);
                        }
                    }
                    Some(_) | None => {}
                }
            }
            // the controller went away: a new primary may be elected (and digest data it did not
            // acknowledge may be sent again)
            let notify = {
                let mut a = device.arb.lock().unwrap_or_else(|p| p.into_inner());
                let was_primary = a.controllers.get(&conn).map(|c| Some(c.election_id) == a.primary()).unwrap_or(false);
                let before = a.primary_info();
                let gone = a.controllers.remove(&conn);
                match &gone {
                    Some(c) => rtlog!(
                        crate::log::Level::Info,
                        "P4Runtime: stream channel of {peer} closed (device {}, election id {}, {})",
                        device.device_id,
                        c.election_id,
                        if was_primary { "was primary" } else { "was backup" }
                    ),
                    None => rtlog!(crate::log::Level::Info, "P4Runtime: stream channel of {peer} closed (it had not arbitrated)"),
                }
                if was_primary {
                    device.digest_cache_clear();
                }
                log_primary_change(device.device_id, &before, &a.primary_info());
                arbitration_messages(&a, device.device_id)
            };
            for (t, m) in notify {
                let _ = t.send(Ok(m)).await;
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn capabilities(&self, _req: Request<p4::CapabilitiesRequest>) -> Result<Response<p4::CapabilitiesResponse>, Status> {
        Ok(Response::new(p4::CapabilitiesResponse { p4runtime_api_version: "1.4.1".into() }))
    }
}

impl Service {
    fn set_pipeline(&self, r: p4::SetForwardingPipelineConfigRequest) -> Result<Response<p4::SetForwardingPipelineConfigResponse>, Status> {
        use p4::set_forwarding_pipeline_config_request::Action as A;
        self.check_device(r.device_id)?;
        self.check_primary(&r.election_id)?;
        let action = A::try_from(r.action).unwrap_or(A::Unspecified);
        if action == A::Commit {
            // realize the config saved by VERIFY_AND_SAVE (state starts empty, as for VERIFY_AND_COMMIT)
            let saved = self.device.saved.lock().unwrap_or_else(|p| p.into_inner()).take();
            return match saved {
                Some(p) => {
                    self.device.digest_configs.lock().unwrap_or_else(|p| p.into_inner()).clear();
                    self.device.digest_cache_clear();
                    *self.device.pipeline.write().unwrap_or_else(|p| p.into_inner()) = Some(p);
                    Ok(Response::new(Default::default()))
                }
                None => Err(Status::failed_precondition("nothing to commit: no config was saved with VERIFY_AND_SAVE")),
            };
        }
        if action == A::Unspecified {
            return Err(Status::invalid_argument("unspecified pipeline config action"));
        }
        let config = r.config.ok_or_else(|| Status::invalid_argument("missing config"))?;
        let p4info = config.p4info.ok_or_else(|| Status::invalid_argument("missing p4info"))?;
        let text = std::str::from_utf8(&config.p4_device_config)
            .map_err(|_| Status::invalid_argument("the device config must be a p4sec program (program.json from `p4sec compile`)"))?;
        let prog = Program::from_json(text).map_err(Status::invalid_argument)?;
        for t in &p4info.tables {
            let id = t.preamble.as_ref().map(|p| p.id).unwrap_or(0);
            if !prog.tables.iter().any(|x| x.id == id) {
                return Err(Status::invalid_argument(format!("the p4info's table id {id} is not in the device config")));
            }
        }
        let mut externs = p4sec_externs::p4::registry();
        externs.extend(p4sec_engine::test_externs::registry());
        let engine = Engine::new(Arc::new(prog), &externs).map_err(Status::invalid_argument)?;
        if matches!(action, A::Verify) {
            return Ok(Response::new(Default::default()));
        }
        let cookie = config.cookie.map(|c| c.cookie).unwrap_or(0);
        let new = Arc::new(Pipeline { engine: Arc::new(engine), p4info, device_config: config.p4_device_config, cookie });
        match action {
            A::VerifyAndSave => {
                *self.device.saved.lock().unwrap_or_else(|p| p.into_inner()) = Some(new);
                return Ok(Response::new(Default::default()));
            }
            A::ReconcileAndCommit => {
                let old = self.pipeline()?;
                let mut profiles = self.device.profiles.lock().unwrap_or_else(|p| p.into_inner());
                let st = reconcile(&old.engine, &new.engine, profiles.for_engine(&old.engine))?;
                profiles.set(&new.engine, st);
                let ids: Vec<u32> = new.engine.prog.digests.iter().map(|d| d.id).collect();
                self.device.digest_configs.lock().unwrap_or_else(|p| p.into_inner()).retain(|id, _| ids.contains(id));
            }
            _ => self.device.digest_configs.lock().unwrap_or_else(|p| p.into_inner()).clear(),
        }
        self.device.digest_cache_clear();
        *self.device.saved.lock().unwrap_or_else(|p| p.into_inner()) = None;
        *self.device.pipeline.write().unwrap_or_else(|p| p.into_inner()) = Some(new);
        Ok(Response::new(Default::default()))
    }
}

/// The Write response: OK, or UNKNOWN with one `p4.v1.Error` per update, as the specification prescribes.
fn write_response(results: Vec<Option<Result<(), Status>>>) -> Result<Response<p4::WriteResponse>, Status> {
    let mut errors = vec![];
    let mut failed = false;
    for r in results {
        match r.unwrap_or_else(|| Err(Status::internal("update not applied"))) {
            Ok(()) => errors.push(p4::Error { canonical_code: Code::Ok as i32, ..Default::default() }),
            Err(s) => {
                failed = true;
                errors.push(p4error(&s));
            }
        }
    }
    if failed {
        let details = errors.into_iter().map(|e| prost_types::Any { type_url: "type.googleapis.com/p4.v1.Error".into(), value: e.encode_to_vec() }).collect();
        let st = rpc::Status { code: Code::Unknown as i32, message: "one or more updates failed".into(), details };
        return Err(Status::with_details(Code::Unknown, "one or more updates failed", st.encode_to_vec().into()));
    }
    Ok(Response::new(p4::WriteResponse {}))
}

/// RECONCILE_AND_COMMIT: carry the forwarding state of `old` into `new`. Table entries move to the table of
/// the same name and id when its keys are the same and their actions (by name) exist with the same
/// parameters; action profile members and groups move to the profile of the same name and id, and the
/// entries that use them with them; direct meter configurations stay with their entries; registers and
/// counters of the same name and shape keep their values; multicast groups and clone sessions are kept.
/// Anything that cannot be carried over is an error and nothing changes. Returns the new profile state.
fn reconcile(old: &Engine, new: &Engine, profiles: &ProfileState) -> Result<ProfileState, Status> {
    let (op, np) = (&old.prog, &new.prog);
    let map_action = |a: &ActionCall, t: &Table| -> Result<ActionCall, Status> {
        let name = &op.actions[a.action as usize].name;
        let ni = np
            .actions
            .iter()
            .position(|x| &x.name == name)
            .ok_or_else(|| Status::failed_precondition(format!("table `{}`: action `{name}` is not in the new program", t.name)))?;
        let (oa, na) = (&op.actions[a.action as usize], &np.actions[ni]);
        if oa.params.iter().map(|p| p.loc.width).ne(na.params.iter().map(|p| p.loc.width)) {
            return Err(Status::failed_precondition(format!("action `{name}` has other parameters in the new program")));
        }
        Ok(ActionCall { action: ni as u32, args: a.args.clone() })
    };
    let st = crate::profiles::reconcile(op, np, profiles, map_action)?;
    let profile_id = |p: &Program, t: &Table| match t.implementation {
        p4sec_ir::Implementation::ActionProfile(i) | p4sec_ir::Implementation::ActionSelector(i) => p.action_profiles.get(i as usize).map(|x| x.id),
        p4sec_ir::Implementation::None => None,
    };
    for (oti, ot) in op.tables.iter().enumerate() {
        let entries = old.table_snapshot(oti).map_err(Status::internal)?.entries.clone();
        let default = old.table_default(oti).map_err(Status::internal)?;
        let Some(nti) = np.tables.iter().position(|t| t.name == ot.name && t.id == ot.id) else {
            if entries.is_empty() || ot.entries_are_const {
                continue;
            }
            return Err(Status::failed_precondition(format!("table `{}` holds entries and is not in the new program", ot.name)));
        };
        let nt = &np.tables[nti];
        let same_keys = ot.keys.len() == nt.keys.len() && ot.keys.iter().zip(&nt.keys).all(|(a, b)| a.id == b.id && a.width == b.width && a.kind == b.kind);
        if ot.entries_are_const || nt.entries_are_const {
            continue;
        }
        if !same_keys && !entries.is_empty() {
            return Err(Status::failed_precondition(format!("table `{}` has other keys in the new program", ot.name)));
        }
        let (opid, npid) = (profile_id(op, ot), profile_id(np, nt));
        if opid != npid && !entries.is_empty() {
            return Err(Status::failed_precondition(format!("table `{}` has another implementation (action profile) in the new program", ot.name)));
        }
        let mut moved = vec![];
        for x in &entries {
            let meter = if nt.direct_meter.is_some() { x.meter.as_ref().and_then(|m| m.rates()) } else { None };
            let e = x.entry.clone();
            match (&x.indirect, npid) {
                (Some(ind), Some(pid)) => {
                    let (action, ind) = match ind.reference {
                        p4sec_engine::tables::ProfileRef::ActionSet => {
                            let choices = ind.choices.iter().map(|(a, w)| Ok((map_action(a, ot)?, *w))).collect::<Result<Vec<_>, Status>>()?;
                            let first = choices.first().map(|(a, _)| a.clone()).unwrap_or_else(|| nt.default_action.clone());
                            (first, Some(Arc::new(p4sec_engine::tables::Indirect::new(ind.reference, choices))))
                        }
                        r => crate::profiles::resolve(nt, &st, pid, r)?,
                    };
                    moved.push((TableEntry { action, ..e }, ind, meter));
                }
                _ => {
                    let e = TableEntry { action: map_action(&e.action, ot)?, ..e };
                    p4sec_engine::tables::validate_entry(np, nt, &e)
                        .map_err(|m| Status::failed_precondition(format!("cannot keep an entry of `{}`: {m}", ot.name)))?;
                    moved.push((e, None, meter));
                }
            }
        }
        let d = map_action(&default, ot).ok().filter(|d| !nt.default_is_const || *d == nt.default_action);
        new.table_update(nti, |t, data| {
            for (e, ind, meter) in moved {
                data.insert_with(t, e, ind, meter)?;
            }
            if let Some(d) = d {
                data.default = d;
            }
            Ok(())
        })
        .map_err(Status::failed_precondition)?;
    }
    for (ri, r) in op.registers.iter().enumerate() {
        if let Some(ni) = np.registers.iter().position(|x| x.name == r.name && x.width == r.width && x.size == r.size) {
            for i in 0..r.size as usize {
                let v = old.register_read(ri, i).map_err(Status::internal)?;
                new.register_write(ni, i, &v).map_err(Status::internal)?;
            }
        }
    }
    for (ci, c) in op.counters.iter().enumerate() {
        if let Some(ni) = np.counters.iter().position(|x| x.name == c.name && x.size == c.size) {
            for i in 0..c.size as usize {
                let (p, b) = old.counter_read(ci, i).map_err(Status::internal)?;
                new.counter_write(ni, i, p, b).map_err(Status::internal)?;
            }
        }
    }
    let pre = old.pre();
    for (session, port) in &pre.mirror {
        new.mirroring_add(*session, *port);
    }
    for (grp, handles) in &pre.groups {
        let replicas: Vec<(u32, u32)> = handles
            .iter()
            .filter_map(|h| pre.nodes.get(*h as usize).cloned().flatten())
            .flat_map(|(rid, ports)| ports.into_iter().map(move |p| (rid, p)))
            .collect();
        new.mc_group_set(*grp, &replicas);
    }
    Ok(st)
}

enum TableOp {
    Entry(EntryUpdate),
    Default(ActionCall),
}

/// ROLLBACK_ON_ERROR and DATAPLANE_ATOMIC writes of table entries: all updates are applied to copies of the
/// tables and published together (packets see all of them or none), or, if one fails, none is; the failing
/// update reports its error and the others ABORTED. Other entities are not supported in these modes.
fn write_atomic(pl: &Pipeline, st: &ProfileState, updates: &[p4::Update]) -> Vec<Result<(), Status>> {
    let prog = &pl.engine.prog;
    let mut ops: Vec<(usize, TableOp)> = vec![];
    let mut results: Vec<Result<(), Status>> = vec![];
    for u in updates {
        let ty = p4::update::Type::try_from(u.r#type).unwrap_or(p4::update::Type::Unspecified);
        let r = (|| {
            let Some(p4::entity::Entity::TableEntry(te)) = u.entity.as_ref().and_then(|e| e.entity.as_ref()) else {
                return Err(Status::unimplemented("atomic writes (ROLLBACK_ON_ERROR, DATAPLANE_ATOMIC) support table entries only"));
            };
            let (ti, t) = table_of(prog, te.table_id)?;
            if te.is_default_action {
                if ty != p4::update::Type::Modify {
                    return Err(Status::invalid_argument("the default entry can only be modified"));
                }
                let a = default_action(prog, t, te)?;
                if t.default_is_const && a != t.default_action {
                    return Err(Status::permission_denied(format!("table `{}` has a const default action", t.name)));
                }
                return Ok((ti, TableOp::Default(a)));
            }
            if t.entries_are_const {
                return Err(Status::failed_precondition(format!("table `{}` has const entries", t.name)));
            }
            Ok((ti, TableOp::Entry(prepare_entry(prog, t, te, ty)?)))
        })();
        match r {
            Ok(op) => {
                ops.push(op);
                results.push(Ok(()));
            }
            Err(s) => results.push(Err(s)),
        }
    }
    let aborted = |results: &mut Vec<Result<(), Status>>| {
        for r in results.iter_mut() {
            if r.is_ok() {
                *r = Err(Status::aborted("not applied: another update of this atomic write failed"));
            }
        }
    };
    if results.iter().any(|r| r.is_err()) {
        aborted(&mut results);
        return results;
    }
    let tis: Vec<usize> = ops.iter().map(|(ti, _)| *ti).collect();
    let mut ops = ops.into_iter().map(|(_, op)| Some(op));
    let mut k = 0usize;
    let mut failed: Option<(usize, Status)> = None;
    let r = pl.engine.tables_update_atomic(&tis, |_, t, d| {
        let i = k;
        k += 1;
        let r = match ops.next().flatten() {
            Some(TableOp::Entry(u)) => apply_entry(prog, t, d, st, u),
            Some(TableOp::Default(a)) => {
                d.default = a;
                Ok(())
            }
            None => Err(Status::internal("no such update")),
        };
        r.map_err(|e| {
            let m = e.message().to_string();
            failed = Some((i, e));
            m
        })
    });
    if r.is_err() {
        if let Some((i, e)) = failed {
            results[i] = Err(e);
        }
        aborted(&mut results);
    }
    results
}

type Notify = Vec<(mpsc::Sender<Result<p4::StreamMessageResponse, Status>>, p4::StreamMessageResponse)>;

/// Arbitration responses for every connected controller: OK for the primary, ALREADY_EXISTS for backups.
fn arbitration_messages(a: &Arbitration, device_id: u64) -> Notify {
    let primary = a.primary();
    a.controllers
        .values()
        .map(|c| {
            let is_primary = Some(c.election_id) == primary;
            let status = rpc::Status {
                code: if is_primary { Code::Ok as i32 } else { Code::AlreadyExists as i32 },
                message: if is_primary { "primary".into() } else { "backup".into() },
                details: vec![],
            };
            let m = p4::StreamMessageResponse {
                update: Some(p4::stream_message_response::Update::Arbitration(p4::MasterArbitrationUpdate {
                    device_id,
                    role: None,
                    election_id: primary.map(to_uint128),
                    status: Some(status),
                })),
            };
            (c.tx.clone(), m)
        })
        .collect()
}

/// Serve P4Runtime on `addr` until the process ends.
pub async fn serve(addr: std::net::SocketAddr, device: Arc<Device>) -> Result<(), String> {
    serve_tls(addr, device, None).await
}

/// PEM files for TLS: the server's certificate and key, and optionally a CA whose certificates clients
/// must present (mutual TLS).
pub struct TlsFiles {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
    pub client_ca: Option<std::path::PathBuf>,
}

pub async fn serve_tls(addr: std::net::SocketAddr, device: Arc<Device>, tls: Option<TlsFiles>) -> Result<(), String> {
    // idle timeouts are looked at every 100 ms
    let d = device.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
        loop {
            tick.tick().await;
            d.check_idle();
        }
    });
    let svc = p4::p4_runtime_server::P4RuntimeServer::new(Service { device }).max_decoding_message_size(64 << 20);
    let mut b = tonic::transport::Server::builder();
    if let Some(t) = tls {
        let read = |p: &std::path::Path| std::fs::read(p).map_err(|e| format!("TLS: cannot read {}: {e}", p.display()));
        let mut cfg = tonic::transport::ServerTlsConfig::new().identity(tonic::transport::Identity::from_pem(read(&t.cert)?, read(&t.key)?));
        if let Some(ca) = &t.client_ca {
            cfg = cfg.client_ca_root(tonic::transport::Certificate::from_pem(read(ca)?));
        }
        b = b.tls_config(cfg).map_err(|e| format!("TLS: {e}"))?;
    }
    b.add_service(svc).serve(addr).await.map_err(|e| format!("gRPC server: {e}"))
}
