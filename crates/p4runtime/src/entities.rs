//! P4Runtime entities beyond table entries: registers, indexed counters, meters and the packet
//! replication engine (multicast groups, clone sessions), written and read through the engine's
//! control-plane API.

use crate::codec::{bytes_to_value, from_entry, lpm_match, meter_config, to_match, value_to_bytes};
use crate::proto::p4::v1 as p4;
use p4sec_engine::meters::MeterRates;
use p4sec_engine::Engine;
use p4sec_ir::Value;
use tonic::Status;

type Up = p4::update::Type;

fn index_range(
    index: &Option<p4::Index>,
    size: usize,
    what: &str,
) -> Result<std::ops::Range<usize>, Status> {
    match index {
        None => Ok(0..size),
        Some(i) if i.index >= 0 && (i.index as usize) < size => {
            Ok(i.index as usize..i.index as usize + 1)
        }
        Some(i) => Err(Status::out_of_range(format!(
            "{what}: index {} is out of range (size {size})",
            i.index
        ))),
    }
}

fn modify_only(ty: Up, what: &str) -> Result<(), Status> {
    if ty != Up::Modify {
        return Err(Status::invalid_argument(format!(
            "{what} entries exist for every index and can only be modified"
        )));
    }
    Ok(())
}

pub fn write_register(e: &Engine, ty: Up, r: &p4::RegisterEntry) -> Result<(), Status> {
    modify_only(ty, "register")?;
    let (ri, reg) = e
        .prog
        .registers
        .iter()
        .enumerate()
        .find(|(_, x)| x.id == r.register_id)
        .ok_or_else(|| Status::not_found(format!("no register with id {}", r.register_id)))?;
    let data = match r.data.as_ref().and_then(|d| d.data.as_ref()) {
        Some(p4::p4_data::Data::Bitstring(b)) => bytes_to_value(b, reg.width, &reg.name)?,
        Some(_) => {
            return Err(Status::invalid_argument(format!(
                "register `{}` holds bit<{}>: the data must be a bitstring",
                reg.name, reg.width
            )))
        }
        None => {
            return Err(Status::invalid_argument(format!(
                "register `{}`: data missing",
                reg.name
            )))
        }
    };
    for i in index_range(&r.index, reg.size as usize, &reg.name)? {
        e.register_write(ri, i, &data)
            .map_err(Status::invalid_argument)?;
    }
    Ok(())
}

pub fn read_register(
    e: &Engine,
    r: &p4::RegisterEntry,
    out: &mut Vec<p4::Entity>,
) -> Result<(), Status> {
    let regs: Vec<usize> = e
        .prog
        .registers
        .iter()
        .enumerate()
        .filter(|(_, x)| r.register_id == 0 || x.id == r.register_id)
        .map(|(i, _)| i)
        .collect();
    if regs.is_empty() && r.register_id != 0 {
        return Err(Status::not_found(format!(
            "no register with id {}",
            r.register_id
        )));
    }
    for ri in regs {
        let reg = &e.prog.registers[ri];
        for i in index_range(&r.index, reg.size as usize, &reg.name)? {
            let v = e.register_read(ri, i).map_err(Status::internal)?;
            out.push(p4::Entity {
                entity: Some(p4::entity::Entity::RegisterEntry(p4::RegisterEntry {
                    register_id: reg.id,
                    index: Some(p4::Index { index: i as i64 }),
                    data: Some(p4::P4Data {
                        data: Some(p4::p4_data::Data::Bitstring(value_to_bytes(&v))),
                    }),
                })),
            });
        }
    }
    Ok(())
}

pub fn write_counter(e: &Engine, ty: Up, c: &p4::CounterEntry) -> Result<(), Status> {
    modify_only(ty, "counter")?;
    let (ci, ctr) = e
        .prog
        .counters
        .iter()
        .enumerate()
        .find(|(_, x)| x.id == c.counter_id)
        .ok_or_else(|| Status::not_found(format!("no counter with id {}", c.counter_id)))?;
    let d = c.data.clone().unwrap_or_default();
    if d.packet_count < 0 || d.byte_count < 0 {
        return Err(Status::invalid_argument(
            "counter values cannot be negative",
        ));
    }
    for i in index_range(&c.index, ctr.size as usize, &ctr.name)? {
        e.counter_write(ci, i, d.packet_count as u64, d.byte_count as u64)
            .map_err(Status::invalid_argument)?;
    }
    Ok(())
}

pub fn write_meter(e: &Engine, ty: Up, m: &p4::MeterEntry) -> Result<(), Status> {
    modify_only(ty, "meter")?;
    let (mi, meter) = e
        .prog
        .meters
        .iter()
        .enumerate()
        .find(|(_, x)| x.id == m.meter_id)
        .ok_or_else(|| Status::not_found(format!("no meter with id {}", m.meter_id)))?;
    let counts = m.counter_data.as_ref().map(counts_of).transpose()?;
    // only counters given: the configuration stays
    let keep_config = m.config.is_none() && counts.is_some();
    let rates = match &m.config {
        None => None, // back to the default: every packet green
        Some(c) => {
            if c.cir < 0 || c.cburst < 0 || c.pir < 0 || c.pburst < 0 {
                return Err(Status::invalid_argument(
                    "meter rates and bursts cannot be negative",
                ));
            }
            if c.pir < c.cir {
                return Err(Status::invalid_argument(format!(
                    "meter `{}`: the peak rate ({}) is below the committed rate ({})",
                    meter.name, c.pir, c.cir
                )));
            }
            Some(MeterRates {
                cir: c.cir as u64,
                cbs: c.cburst as u64,
                pir: c.pir as u64,
                pbs: c.pburst as u64,
            })
        }
    };
    for i in index_range(&m.index, meter.size as usize, &meter.name)? {
        if !keep_config {
            e.meter_set_rates(mi, i, rates)
                .map_err(Status::invalid_argument)?;
        }
        if let Some(c) = counts {
            e.meter_set_counts(mi, i, c)
                .map_err(Status::invalid_argument)?;
        }
    }
    Ok(())
}

pub fn read_meter(e: &Engine, m: &p4::MeterEntry, out: &mut Vec<p4::Entity>) -> Result<(), Status> {
    let ms: Vec<usize> = e
        .prog
        .meters
        .iter()
        .enumerate()
        .filter(|(_, x)| m.meter_id == 0 || x.id == m.meter_id)
        .map(|(i, _)| i)
        .collect();
    if ms.is_empty() && m.meter_id != 0 {
        return Err(Status::not_found(format!(
            "no meter with id {}",
            m.meter_id
        )));
    }
    for mi in ms {
        let meter = &e.prog.meters[mi];
        for i in index_range(&m.index, meter.size as usize, &meter.name)? {
            let r = e.meter_rates(mi, i).map_err(Status::internal)?;
            out.push(p4::Entity {
                entity: Some(p4::entity::Entity::MeterEntry(p4::MeterEntry {
                    meter_id: meter.id,
                    index: Some(p4::Index { index: i as i64 }),
                    config: r.map(|r| p4::MeterConfig {
                        cir: r.cir as i64,
                        cburst: r.cbs as i64,
                        pir: r.pir as i64,
                        pburst: r.pbs as i64,
                        eburst: 0,
                    }),
                    counter_data: Some(meter_counter_data(
                        e.meter_counts(mi, i).map_err(Status::internal)?,
                    )),
                })),
            });
        }
    }
    Ok(())
}

/// Per-colour meter counters as P4Runtime's `MeterCounterData`.
pub(crate) fn meter_counter_data(c: [(u64, u64); 3]) -> p4::MeterCounterData {
    let d = |(p, b): (u64, u64)| {
        Some(p4::CounterData {
            packet_count: p as i64,
            byte_count: b as i64,
        })
    };
    p4::MeterCounterData {
        green: d(c[0]),
        yellow: d(c[1]),
        red: d(c[2]),
    }
}

/// `MeterCounterData` from a write: every colour given (unset ones are zero), no negative count.
fn counts_of(d: &p4::MeterCounterData) -> Result<[(u64, u64); 3], Status> {
    let mut out = [(0, 0); 3];
    for (i, c) in [&d.green, &d.yellow, &d.red].into_iter().enumerate() {
        if let Some(c) = c {
            if c.packet_count < 0 || c.byte_count < 0 {
                return Err(Status::invalid_argument(
                    "meter counter values cannot be negative",
                ));
            }
            out[i] = (c.packet_count as u64, c.byte_count as u64);
        }
    }
    Ok(out)
}

fn replica_port(r: &p4::Replica) -> Result<u32, Status> {
    match &r.port_kind {
        Some(p4::replica::PortKind::EgressPort(p)) => Ok(*p),
        // a byte string as the specification's "Bytestrings" rules read it (of at most 32 bits)
        Some(p4::replica::PortKind::Port(b)) => {
            Ok(bytes_to_value(b, 32, "replica port")?.words[0] as u32)
        }
        None => Err(Status::invalid_argument("replica without a port")),
    }
}

pub fn write_pre(e: &Engine, ty: Up, p: &p4::PacketReplicationEngineEntry) -> Result<(), Status> {
    use p4::packet_replication_engine_entry::Type as T;
    let pre = e.pre();
    match &p.r#type {
        Some(T::MulticastGroupEntry(g)) => {
            let id = g.multicast_group_id;
            if id == 0 {
                return Err(Status::invalid_argument(
                    "multicast group 0 is reserved (no multicast)",
                ));
            }
            let exists = pre.groups.contains_key(&id);
            match ty {
                Up::Insert if exists => Err(Status::already_exists(format!(
                    "multicast group {id} exists"
                ))),
                Up::Modify | Up::Delete if !exists => {
                    Err(Status::not_found(format!("no multicast group {id}")))
                }
                Up::Delete => e.mc_group_delete(id).map_err(Status::invalid_argument),
                Up::Insert | Up::Modify => {
                    let mut replicas = vec![];
                    for r in &g.replicas {
                        let port = replica_port(r)?;
                        if replicas.contains(&(r.instance, port)) {
                            return Err(Status::invalid_argument(format!("multicast group {id}: replica (port {port}, instance {}) given twice", r.instance)));
                        }
                        replicas.push((r.instance, port));
                    }
                    e.mc_group_set(id, &replicas);
                    Ok(())
                }
                Up::Unspecified => Err(Status::invalid_argument("unspecified update type")),
            }
        }
        Some(T::CloneSessionEntry(c)) => {
            let id = c.session_id;
            let exists = pre.mirror.contains_key(&id);
            match ty {
                Up::Insert if exists => {
                    Err(Status::already_exists(format!("clone session {id} exists")))
                }
                Up::Modify | Up::Delete if !exists => {
                    Err(Status::not_found(format!("no clone session {id}")))
                }
                Up::Delete => e.mirroring_delete(id).map_err(Status::invalid_argument),
                Up::Insert | Up::Modify => {
                    if c.replicas.len() != 1 {
                        return Err(Status::unimplemented(format!(
                            "clone session {id}: exactly one replica is supported, got {}",
                            c.replicas.len()
                        )));
                    }
                    if c.packet_length_bytes != 0 {
                        return Err(Status::unimplemented(
                            "clone sessions truncating packets are not supported",
                        ));
                    }
                    e.mirroring_add(id, replica_port(&c.replicas[0])?);
                    Ok(())
                }
                Up::Unspecified => Err(Status::invalid_argument("unspecified update type")),
            }
        }
        None => Err(Status::invalid_argument(
            "packet replication entry without a type",
        )),
    }
}

pub fn read_pre(
    e: &Engine,
    p: &p4::PacketReplicationEngineEntry,
    out: &mut Vec<p4::Entity>,
) -> Result<(), Status> {
    use p4::packet_replication_engine_entry::Type as T;
    let pre = e.pre();
    let wrap = |t: T| p4::Entity {
        entity: Some(p4::entity::Entity::PacketReplicationEngineEntry(
            p4::PacketReplicationEngineEntry { r#type: Some(t) },
        )),
    };
    match &p.r#type {
        Some(T::MulticastGroupEntry(g)) => {
            for (id, handles) in &pre.groups {
                if g.multicast_group_id != 0 && *id != g.multicast_group_id {
                    continue;
                }
                let mut replicas = vec![];
                for h in handles {
                    if let Some(Some((rid, ports))) = pre.nodes.get(*h as usize) {
                        for port in ports {
                            replicas.push(p4::Replica {
                                instance: *rid,
                                port_kind: Some(p4::replica::PortKind::EgressPort(*port)),
                            });
                        }
                    }
                }
                out.push(wrap(T::MulticastGroupEntry(p4::MulticastGroupEntry {
                    multicast_group_id: *id,
                    replicas,
                    metadata: vec![],
                })));
            }
            Ok(())
        }
        Some(T::CloneSessionEntry(c)) => {
            for (id, port) in &pre.mirror {
                if c.session_id != 0 && *id != c.session_id {
                    continue;
                }
                out.push(wrap(T::CloneSessionEntry(p4::CloneSessionEntry {
                    session_id: *id,
                    replicas: vec![p4::Replica {
                        instance: 0,
                        port_kind: Some(p4::replica::PortKind::EgressPort(*port)),
                    }],
                    class_of_service: 0,
                    packet_length_bytes: 0,
                })));
            }
            Ok(())
        }
        None => Err(Status::invalid_argument(
            "packet replication entry without a type",
        )),
    }
}

pub fn write_direct_counter(e: &Engine, ty: Up, d: &p4::DirectCounterEntry) -> Result<(), Status> {
    modify_only(ty, "direct counter")?;
    let te = d
        .table_entry
        .as_ref()
        .ok_or_else(|| Status::invalid_argument("direct counter entry without a table entry"))?;
    let (ti, t) = e
        .prog
        .tables
        .iter()
        .enumerate()
        .find(|(_, t)| t.id == te.table_id)
        .ok_or_else(|| Status::not_found(format!("no table with id {}", te.table_id)))?;
    let entry = to_match(&e.prog, t, te)?;
    let c = d.data.clone().unwrap_or_default();
    if c.packet_count < 0 || c.byte_count < 0 {
        return Err(Status::invalid_argument(
            "counter values cannot be negative",
        ));
    }
    e.table_entry_counters_set(ti, &entry, c.packet_count as u64, c.byte_count as u64)
        .map_err(|m| {
            if m.contains("no entry") {
                Status::not_found(m)
            } else {
                Status::invalid_argument(m)
            }
        })
}

/// Direct counters of every entry of the table (or of every table with one when `table_id` is 0).
pub fn read_direct_counters(
    e: &Engine,
    d: &p4::DirectCounterEntry,
    out: &mut Vec<p4::Entity>,
) -> Result<(), Status> {
    let tid = d.table_entry.as_ref().map(|t| t.table_id).unwrap_or(0);
    let tables: Vec<usize> = e
        .prog
        .tables
        .iter()
        .enumerate()
        .filter(|(_, t)| t.direct_counter.is_some() && (tid == 0 || t.id == tid))
        .map(|(i, _)| i)
        .collect();
    if tables.is_empty() && tid != 0 {
        return Err(Status::not_found(format!(
            "no table with id {tid} and a direct counter"
        )));
    }
    for ti in tables {
        let t = &e.prog.tables[ti];
        for (entry, p, b) in e.table_entries(ti).map_err(Status::internal)? {
            let mut te = from_entry(&e.prog, t, &entry, p, b);
            te.counter_data = None;
            te.action = None;
            out.push(p4::Entity {
                entity: Some(p4::entity::Entity::DirectCounterEntry(
                    p4::DirectCounterEntry {
                        table_entry: Some(te),
                        data: Some(p4::CounterData {
                            byte_count: b as i64,
                            packet_count: p as i64,
                        }),
                    },
                )),
            });
        }
    }
    Ok(())
}

/// The table of a direct meter entry: it must exist (NOT_FOUND) and have a direct meter
/// (INVALID_ARGUMENT).
fn direct_meter_table<'a>(
    e: &'a Engine,
    te: &p4::TableEntry,
) -> Result<(usize, &'a p4sec_ir::Table), Status> {
    let (ti, t) = e
        .prog
        .tables
        .iter()
        .enumerate()
        .find(|(_, t)| t.id == te.table_id)
        .ok_or_else(|| Status::not_found(format!("no table with id {}", te.table_id)))?;
    if t.direct_meter.is_none() {
        return Err(Status::invalid_argument(format!(
            "table `{}` has no direct meter",
            t.name
        )));
    }
    Ok((ti, t))
}

/// MODIFY the direct meter of one table entry: the given configuration, or every packet green when
/// unset.
pub fn write_direct_meter(e: &Engine, ty: Up, d: &p4::DirectMeterEntry) -> Result<(), Status> {
    modify_only(ty, "direct meter")?;
    let te = d
        .table_entry
        .as_ref()
        .ok_or_else(|| Status::invalid_argument("direct meter entry without a table entry"))?;
    let (ti, t) = direct_meter_table(e, te)?;
    let counts = d.counter_data.as_ref().map(counts_of).transpose()?;
    let rates = match &d.config {
        None => None,
        Some(c) => {
            if c.cir < 0 || c.cburst < 0 || c.pir < 0 || c.pburst < 0 {
                return Err(Status::invalid_argument(
                    "meter rates and bursts cannot be negative",
                ));
            }
            if c.pir < c.cir {
                return Err(Status::invalid_argument(format!(
                    "table `{}`: the peak rate ({}) is below the committed rate ({})",
                    t.name, c.pir, c.cir
                )));
            }
            if c.eburst != 0 {
                return Err(Status::invalid_argument(
                    "eburst is for single-rate meters; these are two-rate three-color meters",
                ));
            }
            Some(MeterRates {
                cir: c.cir as u64,
                cbs: c.cburst as u64,
                pir: c.pir as u64,
                pbs: c.pburst as u64,
            })
        }
    };
    let entry = to_match(&e.prog, t, te)?;
    // only counters given: the configuration stays
    let rates = if d.config.is_none() && counts.is_some() {
        None
    } else {
        Some(rates)
    };
    e.direct_meter_set(ti, &entry, rates, counts).map_err(|m| {
        if m.contains("no entry") {
            Status::not_found(m)
        } else {
            Status::invalid_argument(m)
        }
    })
}

/// Direct meter configurations: of one entry (match given), of every entry of a table (no match),
/// or of every table with a direct meter (`table_id` 0). An unconfigured meter reads back without a
/// config.
pub fn read_direct_meters(
    e: &Engine,
    d: &p4::DirectMeterEntry,
    out: &mut Vec<p4::Entity>,
) -> Result<(), Status> {
    use std::sync::atomic::Ordering::Relaxed;
    let te = d.table_entry.clone().unwrap_or_default();
    let (tables, one): (Vec<usize>, Option<p4sec_ir::TableEntry>) = if te.table_id == 0 {
        (
            e.prog
                .tables
                .iter()
                .enumerate()
                .filter(|(_, t)| t.direct_meter.is_some())
                .map(|(i, _)| i)
                .collect(),
            None,
        )
    } else {
        let (ti, t) = direct_meter_table(e, &te)?;
        let one = if te.r#match.is_empty() && te.priority == 0 {
            None
        } else {
            Some(to_match(&e.prog, t, &te)?)
        };
        (vec![ti], one)
    };
    for ti in tables {
        let t = &e.prog.tables[ti];
        let snap = e.table_snapshot(ti).map_err(Status::internal)?;
        let picked: Vec<usize> = match &one {
            Some(m) => vec![snap.find(t, m).ok_or_else(|| {
                Status::not_found(format!("table `{}`: no entry with this match", t.name))
            })?],
            None => (0..snap.entries.len()).collect(),
        };
        for i in picked {
            let x = &snap.entries[i];
            let mut pe = from_entry(
                &e.prog,
                t,
                &x.entry,
                x.packets.load(Relaxed),
                x.bytes.load(Relaxed),
            );
            pe.action = None;
            pe.counter_data = None;
            out.push(p4::Entity {
                entity: Some(p4::entity::Entity::DirectMeterEntry(p4::DirectMeterEntry {
                    table_entry: Some(pe),
                    config: x
                        .meter
                        .as_ref()
                        .and_then(|m| m.rates())
                        .map(|r| meter_config(&r)),
                    counter_data: Some(meter_counter_data(
                        x.meter.as_ref().map(|m| m.counts()).unwrap_or_default(),
                    )),
                })),
            });
        }
    }
    Ok(())
}

fn value_set_of<'a>(e: &'a Engine, id: u32) -> Result<(usize, &'a p4sec_ir::ValueSet), Status> {
    e.prog
        .value_sets
        .iter()
        .enumerate()
        .find(|(_, v)| v.id == id)
        .ok_or_else(|| Status::not_found(format!("no value set with id {id}")))
}

/// A value set's members replace the previous ones (MODIFY, as the specification prescribes). Each
/// member gives one FieldMatch per element of the set (match field ids 1..n, as in the P4Info), of
/// the element's match kind; exact elements also take a ternary match (select keysets take masks).
/// Ternary, LPM, range and optional elements may be left out (don't care); exact ones may not.
pub fn write_value_set(e: &Engine, ty: Up, v: &p4::ValueSetEntry) -> Result<(), Status> {
    use p4::field_match::FieldMatchType as M;
    use p4sec_ir::{FieldMatch, MatchKind};
    modify_only(ty, "value set")?;
    let (vi, vs) = value_set_of(e, v.value_set_id)?;
    if v.members.len() > vs.size as usize {
        return Err(Status::resource_exhausted(format!(
            "value set `{}` holds at most {} members, {} given",
            vs.name,
            vs.size,
            v.members.len()
        )));
    }
    let n = vs.widths.len();
    let mut members = vec![];
    for (mi, m) in v.members.iter().enumerate() {
        let mut fields: Vec<Option<FieldMatch>> = vec![None; n];
        for f in &m.r#match {
            let i = f.field_id as usize;
            if i == 0 || i > n {
                return Err(Status::invalid_argument(format!(
                    "value set `{}` has no match field id {} (it has ids 1 to {n})",
                    vs.name, f.field_id
                )));
            }
            let (w, kind) = (vs.widths[i - 1], vs.kind(i - 1));
            let fname = match vs.field_name(i - 1) {
                "" => format!("value set `{}`, member {}, field {i}", vs.name, mi + 1),
                x => format!(
                    "value set `{}`, member {}, field `{x}` (id {i})",
                    vs.name,
                    mi + 1
                ),
            };
            if fields[i - 1].is_some() {
                return Err(Status::invalid_argument(format!("{fname} is given twice")));
            }
            let all = Value {
                width: w,
                words: (0..p4sec_ir::words_for(w))
                    .map(|j| {
                        if (j + 1) * 64 <= w {
                            u64::MAX
                        } else {
                            (1u64 << (w % 64)) - 1
                        }
                    })
                    .collect(),
            };
            let fm = match (&f.field_match_type, kind) {
                (Some(M::Exact(x)), MatchKind::Exact) => {
                    FieldMatch::Exact(bytes_to_value(&x.value, w, &fname)?)
                }
                (Some(M::Ternary(x)), MatchKind::Exact | MatchKind::Ternary) => {
                    let value = bytes_to_value(&x.value, w, &fname)?;
                    let mask = bytes_to_value(&x.mask, w, &fname)?;
                    if value
                        .words
                        .iter()
                        .zip(&mask.words)
                        .any(|(v, m)| v & !m != 0)
                    {
                        return Err(Status::invalid_argument(format!(
                            "{fname}: the ternary value has bits outside the mask"
                        )));
                    }
                    if kind == MatchKind::Exact && mask == all {
                        FieldMatch::Exact(value)
                    } else {
                        FieldMatch::Ternary { value, mask }
                    }
                }
                (Some(M::Lpm(x)), MatchKind::Lpm) => lpm_match(x, w, &fname, true)?,
                (Some(M::Range(x)), MatchKind::Range) => {
                    let (lo, hi) = (
                        bytes_to_value(&x.low, w, &fname)?,
                        bytes_to_value(&x.high, w, &fname)?,
                    );
                    if lo.words.iter().rev().cmp(hi.words.iter().rev())
                        == std::cmp::Ordering::Greater
                    {
                        return Err(Status::invalid_argument(format!(
                            "{fname}: the range's low bound is above its high bound"
                        )));
                    }
                    FieldMatch::Range { lo, hi }
                }
                (Some(M::Optional(x)), MatchKind::Optional) => {
                    FieldMatch::Optional(Some(bytes_to_value(&x.value, w, &fname)?))
                }
                (None, _) => {
                    return Err(Status::invalid_argument(format!("{fname}: no match given")))
                }
                (Some(_), kind) => {
                    return Err(Status::invalid_argument(format!(
                        "{fname} is matched as {}",
                        kind_name(kind)
                    )))
                }
            };
            fields[i - 1] = Some(fm);
        }
        let mut member = vec![];
        for (i, f) in fields.into_iter().enumerate() {
            match f {
                Some(f) => member.push(f),
                None if vs.kind(i) == MatchKind::Exact => {
                    let what = match vs.field_name(i) {
                        "" => format!("field {}", i + 1),
                        x => format!("field `{x}` (id {})", i + 1),
                    };
                    return Err(Status::invalid_argument(format!(
                        "value set `{}`, member {}: exact {what} is missing",
                        vs.name,
                        mi + 1
                    )));
                }
                None => member.push(FieldMatch::Any),
            }
        }
        members.push(member);
    }
    e.value_set_set(vi, members).map_err(|m| {
        if m.contains("at most") {
            Status::resource_exhausted(m)
        } else {
            Status::invalid_argument(m)
        }
    })
}

fn kind_name(k: p4sec_ir::MatchKind) -> &'static str {
    use p4sec_ir::MatchKind as K;
    match k {
        K::Exact => "exact (or ternary)",
        K::Ternary => "ternary",
        K::Lpm => "lpm",
        K::Range => "range",
        K::Optional => "optional",
        K::Selector => "selector",
    }
}

pub fn read_value_set(
    e: &Engine,
    v: &p4::ValueSetEntry,
    out: &mut Vec<p4::Entity>,
) -> Result<(), Status> {
    use p4::field_match::FieldMatchType as M;
    use p4sec_ir::FieldMatch;
    let sets: Vec<usize> = e
        .prog
        .value_sets
        .iter()
        .enumerate()
        .filter(|(_, x)| v.value_set_id == 0 || x.id == v.value_set_id)
        .map(|(i, _)| i)
        .collect();
    if sets.is_empty() && v.value_set_id != 0 {
        return Err(Status::not_found(format!(
            "no value set with id {}",
            v.value_set_id
        )));
    }
    for vi in sets {
        let vs = &e.prog.value_sets[vi];
        let members = e
            .value_set_get(vi)
            .map_err(Status::internal)?
            .into_iter()
            .map(|member| p4::ValueSetMember {
                r#match: member
                    .iter()
                    .enumerate()
                    .filter_map(|(i, f)| {
                        let t = match f {
                            FieldMatch::Exact(x) => M::Exact(p4::field_match::Exact {
                                value: value_to_bytes(x),
                            }),
                            FieldMatch::Ternary { value, mask } => {
                                M::Ternary(p4::field_match::Ternary {
                                    value: value_to_bytes(value),
                                    mask: value_to_bytes(mask),
                                })
                            }
                            FieldMatch::Lpm { value, prefix_len } => M::Lpm(p4::field_match::Lpm {
                                value: value_to_bytes(value),
                                prefix_len: *prefix_len as i32,
                            }),
                            FieldMatch::Range { lo, hi } => M::Range(p4::field_match::Range {
                                low: value_to_bytes(lo),
                                high: value_to_bytes(hi),
                            }),
                            FieldMatch::Optional(Some(x)) => {
                                M::Optional(p4::field_match::Optional {
                                    value: value_to_bytes(x),
                                })
                            }
                            FieldMatch::Optional(None) | FieldMatch::Any => return None,
                        };
                        Some(p4::FieldMatch {
                            field_id: i as u32 + 1,
                            field_match_type: Some(t),
                        })
                    })
                    .collect(),
            })
            .collect();
        out.push(p4::Entity {
            entity: Some(p4::entity::Entity::ValueSetEntry(p4::ValueSetEntry {
                value_set_id: vs.id,
                members,
            })),
        });
    }
    Ok(())
}
