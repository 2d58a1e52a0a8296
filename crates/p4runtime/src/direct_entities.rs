//! P4Runtime's direct counters and meters: the counter and meter cells of one table entry (or of
//! every entry of a table), written and read through the engine's table API.

use crate::codec::{from_entry, meter_config, meter_rates, table_of, to_match};
use crate::indexed_entities::{
    counter_data, counter_values, counts_of, meter_counter_data, modify_only, Up,
};
use crate::proto::p4::v1 as p4;
use p4sec_engine::Engine;
use tonic::Status;

/// An error of the engine's direct-resource API: NOT_FOUND for a missing entry, else
/// INVALID_ARGUMENT.
fn entry_status(m: String) -> Status {
    if m.contains("no entry") {
        Status::not_found(m)
    } else {
        Status::invalid_argument(m)
    }
}

pub fn write_direct_counter(e: &Engine, ty: Up, d: &p4::DirectCounterEntry) -> Result<(), Status> {
    modify_only(ty, "direct counter")?;
    let te = d
        .table_entry
        .as_ref()
        .ok_or_else(|| Status::invalid_argument("direct counter entry without a table entry"))?;
    let (ti, t) = table_of(&e.prog, te.table_id)?;
    let entry = to_match(&e.prog, t, te)?;
    let (packets, bytes) = counter_values(&d.data.unwrap_or_default())?;
    e.table_entry_counters_set(ti, &entry, packets, bytes)
        .map_err(entry_status)
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
                        data: Some(counter_data((p, b))),
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
    let (ti, t) = table_of(&e.prog, te.table_id)?;
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
        Some(c) => Some(meter_rates(c, &format!("table `{}`", t.name))?),
    };
    let entry = to_match(&e.prog, t, te)?;
    // only counters given: the configuration stays
    let rates = if d.config.is_none() && counts.is_some() {
        None
    } else {
        Some(rates)
    };
    e.direct_meter_set(ti, &entry, rates, counts)
        .map_err(entry_status)
}

/// Direct meter configurations: of one entry (match given), of every entry of a table (no match),
/// or of every table with a direct meter (`table_id` 0). An unconfigured meter reads back without a
/// config.
pub fn read_direct_meters(
    e: &Engine,
    d: &p4::DirectMeterEntry,
    out: &mut Vec<p4::Entity>,
) -> Result<(), Status> {
    use crate::status::status;
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
        let picked = match &one {
            Some(m) => vec![e.table_read_entry(ti, m).map_err(status)?],
            None => e.table_read(ti).map_err(status)?,
        };
        for x in picked {
            let mut pe = from_entry(&e.prog, t, &x.entry, x.packets, x.bytes);
            pe.action = None;
            pe.counter_data = None;
            out.push(p4::Entity {
                entity: Some(p4::entity::Entity::DirectMeterEntry(p4::DirectMeterEntry {
                    table_entry: Some(pe),
                    config: x.meter.and_then(|(r, _)| r).map(|r| meter_config(&r)),
                    counter_data: Some(meter_counter_data(
                        x.meter.map(|(_, c)| c).unwrap_or_default(),
                    )),
                })),
            });
        }
    }
    Ok(())
}
