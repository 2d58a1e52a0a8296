//! The Read path: table entries (with counters, meters and idle times), counters, registers,
//! meters, the packet replication engine, digests, value sets, action profiles, and extern queries,
//! in P4Runtime form.

use crate::codec::{from_entry, meter_config, table_of};
use crate::device::{Device, Pipeline};
use crate::proto::p4::v1 as p4;
use p4sec_ir::{Table, TableEntry};
use tonic::Status;

/// The entities a Read request asks for, from the installed pipeline `pl` (the device already
/// checked).
pub(crate) fn read(
    device: &Device,
    pl: &Pipeline,
    r: &p4::ReadRequest,
) -> Result<Vec<p4::Entity>, Status> {
    let prog = &pl.engine.prog;
    let mut out = vec![];
    for ent in &r.entities {
        match ent.entity.as_ref() {
            Some(p4::entity::Entity::TableEntry(te)) => {
                let tables: Vec<usize> = if te.table_id == 0 {
                    (0..prog.tables.len()).collect()
                } else {
                    vec![table_of(prog, te.table_id)?.0]
                };
                for ti in tables {
                    let t = &prog.tables[ti];
                    if te.is_default_action {
                        let d = pl.engine.table_default(ti).map_err(Status::internal)?;
                        let e = TableEntry {
                            matches: vec![],
                            action: d,
                            priority: 0,
                        };
                        let mut pe = from_entry(
                            prog,
                            &Table {
                                keys: vec![],
                                ..t.clone()
                            },
                            &e,
                            0,
                            0,
                        );
                        pe.is_default_action = true;
                        out.push(p4::Entity {
                            entity: Some(p4::entity::Entity::TableEntry(pe)),
                        });
                        continue;
                    }
                    for x in pl.engine.table_read(ti).map_err(crate::status::status)? {
                        let mut pe = from_entry(prog, t, &x.entry, x.packets, x.bytes);
                        if let Some(target) = &x.target {
                            pe.action = Some(crate::table_action::table_action_of(prog, target));
                        }
                        if te.meter_config.is_some() && t.direct_meter.is_some() {
                            pe.meter_config = x
                                .meter
                                .and_then(|(rates, _)| rates)
                                .map(|r| meter_config(&r));
                        }
                        if t.support_timeout {
                            pe.idle_timeout_ns = x.idle_timeout_ns as i64;
                            if te.time_since_last_hit.is_some() {
                                let ms = p4sec_engine::coarse_ms().saturating_sub(x.last_hit_ms);
                                pe.time_since_last_hit = Some(p4::table_entry::IdleTimeout {
                                    elapsed_ns: (ms * 1_000_000) as i64,
                                });
                            }
                        }
                        if te.meter_counter_data.is_some() && t.direct_meter.is_some() {
                            pe.meter_counter_data =
                                Some(crate::indexed_entities::meter_counter_data(
                                    x.meter.map(|(_, c)| c).unwrap_or_default(),
                                ));
                        }
                        out.push(p4::Entity {
                            entity: Some(p4::entity::Entity::TableEntry(pe)),
                        });
                    }
                }
            }
            Some(p4::entity::Entity::CounterEntry(ce)) => {
                let cs: Vec<usize> = prog
                    .counters
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| ce.counter_id == 0 || c.id == ce.counter_id)
                    .map(|(i, _)| i)
                    .collect();
                if cs.is_empty() {
                    return Err(Status::not_found(format!(
                        "no counter with id {}",
                        ce.counter_id
                    )));
                }
                for ci in cs {
                    let c = &prog.counters[ci];
                    let idx: Vec<u32> = match &ce.index {
                        Some(i) => vec![i.index as u32],
                        None => (0..c.size).collect(),
                    };
                    for i in idx {
                        let (p, b) = pl
                            .engine
                            .counter_read(ci, i as usize)
                            .map_err(Status::invalid_argument)?;
                        out.push(p4::Entity {
                            entity: Some(p4::entity::Entity::CounterEntry(p4::CounterEntry {
                                counter_id: c.id,
                                index: Some(p4::Index { index: i as i64 }),
                                data: Some(p4::CounterData {
                                    byte_count: b as i64,
                                    packet_count: p as i64,
                                }),
                            })),
                        });
                    }
                }
            }
            Some(p4::entity::Entity::RegisterEntry(r)) => {
                crate::indexed_entities::read_register(&pl.engine, r, &mut out)?
            }
            Some(p4::entity::Entity::MeterEntry(m)) => {
                crate::indexed_entities::read_meter(&pl.engine, m, &mut out)?
            }
            Some(p4::entity::Entity::PacketReplicationEngineEntry(p)) => {
                crate::replication::read_pre(&pl.engine, p, &mut out)?
            }
            Some(p4::entity::Entity::DigestEntry(d)) => device.read_digest_entries(d, &mut out),
            Some(p4::entity::Entity::DirectCounterEntry(d)) => {
                crate::direct_entities::read_direct_counters(&pl.engine, d, &mut out)?
            }
            Some(p4::entity::Entity::ValueSetEntry(v)) => {
                crate::value_sets::read_value_set(&pl.engine, v, &mut out)?
            }
            Some(p4::entity::Entity::DirectMeterEntry(d)) => {
                crate::direct_entities::read_direct_meters(&pl.engine, d, &mut out)?
            }
            Some(p4::entity::Entity::ActionProfileMember(m)) => {
                crate::action_profiles::read_members(&pl.engine, m, &mut out)?
            }
            Some(p4::entity::Entity::ActionProfileGroup(g)) => {
                crate::action_profiles::read_groups(&pl.engine, g, &mut out)?
            }
            Some(p4::entity::Entity::ExternEntry(x)) => {
                // p4sec externs: a query operation (read-only by name: `*_stats` or `get_*`) with
                // its JSON argument in the entry's Any; the answer comes back as the JSON value of
                // the same Any
                let inst = prog
                    .externs
                    .iter()
                    .find(|e| p4sec_ir::p4info::extern_id(&e.name) == x.extern_id)
                    .ok_or_else(|| {
                        Status::not_found(format!("no extern instance with id {}", x.extern_id))
                    })?;
                let any = x
                    .entry
                    .as_ref()
                    .ok_or_else(|| Status::invalid_argument("extern entry without a query"))?;
                let op = any.type_url.rsplit('.').next().unwrap_or("");
                if !(op.ends_with("_stats") || op.starts_with("get_")) {
                    return Err(Status::invalid_argument(format!(
                        "`{op}` is not a query operation (reads take `*_stats` or `get_*`)"
                    )));
                }
                let value = pl
                    .engine
                    .extern_control(&inst.name, op, &any.value)
                    .map_err(Status::invalid_argument)?;
                let mut e = x.clone();
                e.entry = Some(prost_types::Any {
                    type_url: any.type_url.clone(),
                    value,
                });
                out.push(p4::Entity {
                    entity: Some(p4::entity::Entity::ExternEntry(e)),
                });
            }
            _ => return Err(Status::unimplemented("this entity cannot be read yet")),
        }
    }
    if let Some(tr) = &pl.translator {
        out.iter_mut().for_each(|e| tr.entity_out(e));
    }
    Ok(out)
}
