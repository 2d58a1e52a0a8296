//! P4Runtime's indexed stateful entities: registers, indexed counters and meters, written and read
//! through the engine's control-plane API; and what the entities that exist for every index (or
//! every entry) share: MODIFY only, counter data and meter counter data.

use crate::codec::{bytes_to_value, meter_config, meter_rates, value_to_bytes};
use crate::proto::p4::v1 as p4;
use p4sec_engine::Engine;
use tonic::Status;

pub(crate) type Up = p4::update::Type;

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

pub(crate) fn modify_only(ty: Up, what: &str) -> Result<(), Status> {
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
    let (packets, bytes) = counter_values(&c.data.unwrap_or_default())?;
    for i in index_range(&c.index, ctr.size as usize, &ctr.name)? {
        e.counter_write(ci, i, packets, bytes)
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
        Some(c) => Some(meter_rates(c, &format!("meter `{}`", meter.name))?),
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
                    config: r.map(|r| meter_config(&r)),
                    counter_data: Some(meter_counter_data(
                        e.meter_counts(mi, i).map_err(Status::internal)?,
                    )),
                })),
            });
        }
    }
    Ok(())
}

/// (packets, bytes) as P4Runtime's `CounterData`.
pub(crate) fn counter_data((p, b): (u64, u64)) -> p4::CounterData {
    p4::CounterData {
        packet_count: p as i64,
        byte_count: b as i64,
    }
}

/// (packets, bytes) from a write's `CounterData`: no negative count.
pub(crate) fn counter_values(d: &p4::CounterData) -> Result<(u64, u64), Status> {
    if d.packet_count < 0 || d.byte_count < 0 {
        return Err(Status::invalid_argument(
            "counter values cannot be negative",
        ));
    }
    Ok((d.packet_count as u64, d.byte_count as u64))
}

/// Per-colour meter counters as P4Runtime's `MeterCounterData`.
pub(crate) fn meter_counter_data(c: [(u64, u64); 3]) -> p4::MeterCounterData {
    let d = |c| Some(counter_data(c));
    p4::MeterCounterData {
        green: d(c[0]),
        yellow: d(c[1]),
        red: d(c[2]),
    }
}

/// `MeterCounterData` from a write: every colour given (unset ones are zero), no negative count.
pub(crate) fn counts_of(d: &p4::MeterCounterData) -> Result<[(u64, u64); 3], Status> {
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
