//! The Write path: updates checked against the program ([`prepare_entry`]), applied per table as
//! one new table version (or all together for the atomic modes), and the Write response with its
//! per-update errors.

use crate::codec::{default_action, meter_rates, table_of, to_entry, to_match};
use crate::device::{Device, Pipeline};
use crate::profiles::ProfileState;
use crate::proto::google::rpc;
use crate::proto::p4::v1 as p4;
use p4sec_engine::meters::MeterRates;
use p4sec_engine::tables::TableData;
use p4sec_ir::{ActionCall, Program, Table, TableEntry};
use prost::Message;
use std::collections::HashMap;
use tonic::{Code, Status};

/// Apply a Write request's updates to the installed pipeline `pl` (the device and the primary
/// controller already checked).
pub(crate) fn write(
    device: &Device,
    pl: &Pipeline,
    r: &p4::WriteRequest,
) -> Result<p4::WriteResponse, Status> {
    let Some(tr) = &pl.translator else {
        return write_dp(device, pl, r, vec![]);
    };
    let _writing = tr.writing.lock().unwrap_or_else(|p| p.into_inner());
    // translated types: the updates in their data-plane form; an update that cannot be translated
    // fails on its own (and makes an atomic batch fail)
    let mut dp = p4::WriteRequest {
        device_id: r.device_id,
        election_id: r.election_id,
        atomicity: r.atomicity,
        updates: Vec::with_capacity(r.updates.len()),
        ..Default::default()
    };
    let mut failed = vec![];
    for (i, u) in r.updates.iter().enumerate() {
        let mut u = u.clone();
        if let Err(e) = tr.update_in(&mut u) {
            failed.push((i, e));
            u.entity = None;
        }
        dp.updates.push(u);
    }
    let res = write_dp(device, pl, &dp, failed);
    let mut profiles = device.profiles.lock().unwrap_or_else(|p| p.into_inner());
    tr.collect(&pl.engine, profiles.for_engine(&pl.engine).members.values());
    res
}

/// `write` of updates in their data-plane form; `failed`: updates that already failed (by index).
fn write_dp(
    device: &Device,
    pl: &Pipeline,
    r: &p4::WriteRequest,
    failed: Vec<(usize, Status)>,
) -> Result<p4::WriteResponse, Status> {
    let prog = pl.engine.prog.clone();
    let atomicity = p4::write_request::Atomicity::try_from(r.atomicity)
        .map_err(|_| Status::invalid_argument(format!("unknown atomicity {}", r.atomicity)))?;
    check_capacity(pl, &r.updates)?;
    // one write at a time: members, groups and the entries that use them change together
    let mut profiles = device.profiles.lock().unwrap_or_else(|p| p.into_inner());
    let st = profiles.for_engine(&pl.engine);
    if atomicity != p4::write_request::Atomicity::ContinueOnError {
        let results = if failed.is_empty() {
            write_atomic(pl, st, &r.updates)
        } else {
            let mut results: Vec<Result<(), Status>> = r
                .updates
                .iter()
                .map(|_| {
                    Err(Status::aborted(
                        "not applied: another update of this atomic write failed",
                    ))
                })
                .collect();
            for (i, e) in failed {
                results[i] = Err(e);
            }
            results
        };
        return write_response(results.into_iter().map(Some).collect());
    }
    // Table entry updates are grouped per table and published as one new table version per table
    // (the engine's RCU write), after everything else, which is applied one by one (so entries see
    // the members and groups of the same batch). Results keep the update order.
    let mut results: Vec<Option<Result<(), Status>>> = (0..r.updates.len()).map(|_| None).collect();
    let mut per_table: HashMap<usize, Vec<(usize, EntryUpdate)>> = HashMap::new();
    for (i, e) in failed {
        results[i] = Some(Err(e));
    }
    for (i, u) in r.updates.iter().enumerate() {
        if results[i].is_some() {
            continue;
        }
        let ty = p4::update::Type::try_from(u.r#type).unwrap_or(p4::update::Type::Unspecified);
        if let Some(p4::entity::Entity::TableEntry(te)) =
            u.entity.as_ref().and_then(|e| e.entity.as_ref())
        {
            if !te.is_default_action && ty != p4::update::Type::Unspecified {
                let r = table_of(&prog, te.table_id).and_then(|(ti, t)| {
                    if t.entries_are_const {
                        return Err(Status::failed_precondition(format!(
                            "table `{}` has const entries",
                            t.name
                        )));
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
        results[i] = Some(apply_update(device, pl, st, u));
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

/// A batch that cannot fit is refused as a whole before any of its updates is prepared (no
/// per-entry state is built for it): RESOURCE_EXHAUSTED when, for some table, its INSERTs less its
/// DELETEs exceed the room the table has left (its `size` less the entries it holds). Even in the
/// best order such a batch would fail; a batch that may fit goes on, and an INSERT that finds its
/// table full fails on its own.
fn check_capacity(pl: &Pipeline, updates: &[p4::Update]) -> Result<(), Status> {
    use p4::update::Type as T;
    let prog = &pl.engine.prog;
    // table id → (inserts, deletes)
    let mut per: HashMap<u32, (u64, u64)> = HashMap::new();
    for u in updates {
        let Some(p4::entity::Entity::TableEntry(te)) =
            u.entity.as_ref().and_then(|e| e.entity.as_ref())
        else {
            continue;
        };
        if te.is_default_action {
            continue;
        }
        let c = per.entry(te.table_id).or_default();
        match T::try_from(u.r#type) {
            Ok(T::Insert) => c.0 += 1,
            Ok(T::Delete) => c.1 += 1,
            _ => {}
        }
    }
    for (id, (ins, del)) in per {
        let Ok((ti, t)) = table_of(prog, id) else {
            continue;
        };
        if ins <= del {
            continue;
        }
        let held = pl
            .engine
            .table_snapshot(ti)
            .map(|d| d.entries.len() as u64)
            .unwrap_or(0);
        let room = (t.size as u64).saturating_sub(held);
        if ins - del > room {
            return Err(Status::resource_exhausted(format!(
                "table `{}` cannot take this batch: {ins} inserts and {del} deletes, but it holds {held} of its {} entries \
                 (room for {room}); nothing was written",
                t.name, t.size
            )));
        }
    }
    Ok(())
}

fn apply_update(
    device: &Device,
    pl: &Pipeline,
    st: &mut ProfileState,
    u: &p4::Update,
) -> Result<(), Status> {
    let prog = &pl.engine.prog;
    let ty = p4::update::Type::try_from(u.r#type).unwrap_or(p4::update::Type::Unspecified);
    let entity = u
        .entity
        .as_ref()
        .and_then(|e| e.entity.as_ref())
        .ok_or_else(|| Status::invalid_argument("update without an entity"))?;
    match entity {
        p4::entity::Entity::TableEntry(te) => {
            let (ti, t) = table_of(prog, te.table_id)?;
            if te.is_default_action {
                if ty != p4::update::Type::Modify {
                    return Err(Status::invalid_argument(
                        "the default entry can only be modified",
                    ));
                }
                let a = default_action(prog, t, te)?;
                return pl
                    .engine
                    .table_set_default(ti, a)
                    .map_err(Status::invalid_argument);
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
                .ok_or_else(|| {
                    Status::not_found(format!("no extern instance with id {}", x.extern_id))
                })?;
            let any = x
                .entry
                .as_ref()
                .ok_or_else(|| Status::invalid_argument("extern entry without a value"))?;
            let op = any.type_url.rsplit('.').next().unwrap_or("");
            // a DELETE of an entry written with an operation runs the operation that undoes it, as
            // the extern type declares it (e.g. `esp_sad`: `add_sa` is undone by `del_sa`)
            let undo = match ty {
                p4::update::Type::Delete => device
                    .extern_type(&inst.type_name)
                    .and_then(|t| t.undo_op(op)),
                _ => None,
            };
            let op = undo.unwrap_or(op);
            pl.engine
                .extern_control(&inst.name, op, &any.value)
                .map(|_| ())
                .map_err(Status::invalid_argument)
        }
        p4::entity::Entity::RegisterEntry(r) => crate::entities::write_register(&pl.engine, ty, r),
        p4::entity::Entity::CounterEntry(c) => crate::entities::write_counter(&pl.engine, ty, c),
        p4::entity::Entity::MeterEntry(m) => crate::entities::write_meter(&pl.engine, ty, m),
        p4::entity::Entity::PacketReplicationEngineEntry(p) => {
            crate::entities::write_pre(&pl.engine, ty, p)
        }
        p4::entity::Entity::DigestEntry(d) => device.write_digest_entry(prog, ty, d),
        p4::entity::Entity::DirectCounterEntry(d) => {
            crate::entities::write_direct_counter(&pl.engine, ty, d)
        }
        p4::entity::Entity::ValueSetEntry(v) => crate::entities::write_value_set(&pl.engine, ty, v),
        p4::entity::Entity::ActionProfileMember(m) => {
            crate::profiles::write_member(&pl.engine, st, ty, m)
        }
        p4::entity::Entity::ActionProfileGroup(g) => {
            crate::profiles::write_group(&pl.engine, st, ty, g)
        }
        p4::entity::Entity::DirectMeterEntry(d) => {
            crate::entities::write_direct_meter(&pl.engine, ty, d)
        }
    }
}

/// A table-entry update checked against the table, ready for the engine. Entries of tables with an
/// action profile or selector keep their `TableAction` in `indirect`, resolved against the members
/// and groups when the update is applied (after the other updates of the batch); `entry.action`
/// stands in until then.
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

fn prepare_entry(
    prog: &Program,
    t: &Table,
    te: &p4::TableEntry,
    ty: p4::update::Type,
) -> Result<EntryUpdate, Status> {
    use p4::update::Type as T;
    if ty == T::Unspecified {
        return Err(Status::invalid_argument("unspecified update type"));
    }
    let ta = te.action.as_ref().and_then(|a| a.r#type.as_ref());
    let indirect_table = t.implementation != p4sec_ir::Implementation::None;
    if ty == T::Delete {
        let entry = if indirect_table || !matches!(ta, Some(p4::table_action::Type::Action(_))) {
            to_match(prog, t, te)?
        } else {
            to_entry(prog, t, te)?
        };
        return Ok(EntryUpdate {
            ty,
            entry,
            indirect: None,
            meter: None,
            idle: None,
        });
    }
    if te.idle_timeout_ns < 0 {
        return Err(Status::invalid_argument(format!(
            "table `{}`: idle_timeout_ns cannot be negative",
            t.name
        )));
    }
    if te.idle_timeout_ns > 0 && !t.support_timeout {
        return Err(Status::invalid_argument(format!(
            "table `{}` does not support idle timeouts (no `support_timeout = true`): idle_timeout_ns must be 0",
            t.name
        )));
    }
    let idle = t.support_timeout.then_some(te.idle_timeout_ns as u64);
    if te.meter_counter_data.is_some() {
        return Err(Status::unimplemented(
            "a table entry's meter_counter_data cannot be written: write its DirectMeterEntry",
        ));
    }
    let rates = match (&te.meter_config, t.direct_meter) {
        (Some(_), None) => {
            return Err(Status::invalid_argument(format!(
                "table `{}` has no direct meter: meter_config must be unset",
                t.name
            )))
        }
        (Some(c), Some(_)) => Some(meter_rates(c, &t.name)?),
        (None, _) => None,
    };
    let meter = match ty {
        T::Insert => Some(rates),
        _ if t.direct_meter.is_some() => Some(rates),
        _ => None,
    };
    if indirect_table {
        let ta = ta
            .cloned()
            .ok_or_else(|| Status::invalid_argument("the table entry has no action"))?;
        return Ok(EntryUpdate {
            ty,
            entry: to_match(prog, t, te)?,
            indirect: Some(ta),
            meter,
            idle,
        });
    }
    let e = to_entry(prog, t, te)?;
    p4sec_engine::tables::validate_entry(prog, t, &e).map_err(Status::invalid_argument)?;
    Ok(EntryUpdate {
        ty,
        entry: e,
        indirect: None,
        meter,
        idle,
    })
}

/// Apply a prepared table-entry update to a table version (resolving its action profile reference).
fn apply_entry(
    prog: &Program,
    t: &Table,
    d: &mut TableData,
    st: &ProfileState,
    u: EntryUpdate,
) -> Result<(), Status> {
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
        (Some((ns, e)), T::Insert | T::Modify) => {
            d.set_idle_timeout(t, &e, ns).map_err(table_error)
        }
        _ => Ok(()),
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

fn p4error(s: &Status) -> p4::Error {
    p4::Error {
        canonical_code: s.code() as i32,
        message: s.message().to_string(),
        space: String::new(),
        code: 0,
        details: None,
    }
}

/// Batches up to this size get one `p4.v1.Error` per update in the Write error's details.
const POSITIONAL_DETAILS_MAX: usize = 100;
/// Larger batches get the errors of their first this many failed updates only (each naming its
/// update).
const FAILED_DETAILS_MAX: usize = 50;

/// The Write response: OK, or UNKNOWN with its details as the specification prescribes: one
/// `p4.v1.Error` per update (OK for those that succeeded). For a batch of more than
/// [`POSITIONAL_DETAILS_MAX`] updates that would not fit gRPC's metadata limits, so the details are
/// the first [`FAILED_DETAILS_MAX`] failures, each message starting with its update's index, and
/// the status message counts them all.
fn write_response(results: Vec<Option<Result<(), Status>>>) -> Result<p4::WriteResponse, Status> {
    let n = results.len();
    let results: Vec<Result<(), Status>> = results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Status::internal("update not applied"))))
        .collect();
    let failed = results.iter().filter(|r| r.is_err()).count();
    if failed == 0 {
        return Ok(p4::WriteResponse {});
    }
    let (errors, message): (Vec<p4::Error>, String) = if n <= POSITIONAL_DETAILS_MAX {
        let errors = results
            .iter()
            .map(|r| match r {
                Ok(()) => p4::Error {
                    canonical_code: Code::Ok as i32,
                    ..Default::default()
                },
                Err(s) => p4error(s),
            })
            .collect();
        (errors, "one or more updates failed".into())
    } else {
        let errors = results
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.as_ref().err().map(|s| (i, s)))
            .take(FAILED_DETAILS_MAX)
            .map(|(i, s)| p4::Error {
                message: format!("update {i}: {}", s.message()),
                ..p4error(s)
            })
            .collect();
        let shown = failed.min(FAILED_DETAILS_MAX);
        (errors, format!("{failed} of {n} updates failed; the details hold the first {shown} failures, each naming its update's index"))
    };
    let details = errors
        .into_iter()
        .map(|e| prost_types::Any {
            type_url: "type.googleapis.com/p4.v1.Error".into(),
            value: e.encode_to_vec(),
        })
        .collect();
    let st = rpc::Status {
        code: Code::Unknown as i32,
        message: message.clone(),
        details,
    };
    Err(Status::with_details(
        Code::Unknown,
        message,
        st.encode_to_vec().into(),
    ))
}

enum TableOp {
    Entry(EntryUpdate),
    Default(ActionCall),
}

/// ROLLBACK_ON_ERROR and DATAPLANE_ATOMIC writes of table entries: all updates are applied to
/// copies of the tables and published together (packets see all of them or none), or, if one fails,
/// none is; the failing update reports its error and the others ABORTED. Other entities are not
/// supported in these modes.
fn write_atomic(
    pl: &Pipeline,
    st: &ProfileState,
    updates: &[p4::Update],
) -> Vec<Result<(), Status>> {
    let prog = &pl.engine.prog;
    let mut ops: Vec<(usize, TableOp)> = vec![];
    let mut results: Vec<Result<(), Status>> = vec![];
    for u in updates {
        let ty = p4::update::Type::try_from(u.r#type).unwrap_or(p4::update::Type::Unspecified);
        let r = (|| {
            let Some(p4::entity::Entity::TableEntry(te)) =
                u.entity.as_ref().and_then(|e| e.entity.as_ref())
            else {
                return Err(Status::unimplemented("atomic writes (ROLLBACK_ON_ERROR, DATAPLANE_ATOMIC) support table entries only"));
            };
            let (ti, t) = table_of(prog, te.table_id)?;
            if te.is_default_action {
                if ty != p4::update::Type::Modify {
                    return Err(Status::invalid_argument(
                        "the default entry can only be modified",
                    ));
                }
                let a = default_action(prog, t, te)?;
                if t.default_is_const && a != t.default_action {
                    return Err(Status::permission_denied(format!(
                        "table `{}` has a const default action",
                        t.name
                    )));
                }
                return Ok((ti, TableOp::Default(a)));
            }
            if t.entries_are_const {
                return Err(Status::failed_precondition(format!(
                    "table `{}` has const entries",
                    t.name
                )));
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
                *r = Err(Status::aborted(
                    "not applied: another update of this atomic write failed",
                ));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn details(s: &Status) -> rpc::Status {
        rpc::Status::decode(s.details()).unwrap()
    }

    /// Small batches: one error per update; large ones: the first failures only, named by index,
    /// and a count, so that a batch of 60,000 updates with failures still gets an answer a client
    /// can read.
    #[test]
    fn write_error_details_are_capped() {
        let small: Vec<_> = (0..3)
            .map(|i| {
                Some(if i == 1 {
                    Err(Status::not_found("x"))
                } else {
                    Ok(())
                })
            })
            .collect();
        let st = details(&write_response(small).unwrap_err());
        assert_eq!(st.details.len(), 3);
        let e1 = p4::Error::decode(&st.details[1].value[..]).unwrap();
        assert_eq!(
            (e1.canonical_code, e1.message.as_str()),
            (Code::NotFound as i32, "x")
        );
        let big: Vec<_> = (0..60_000)
            .map(|i| {
                Some(if i % 2 == 1 {
                    Err(Status::invalid_argument("bad"))
                } else {
                    Ok(())
                })
            })
            .collect();
        let s = write_response(big).unwrap_err();
        let st = details(&s);
        assert_eq!(st.details.len(), FAILED_DETAILS_MAX);
        assert!(
            s.message().starts_with("30000 of 60000 updates failed"),
            "{}",
            s.message()
        );
        let e0 = p4::Error::decode(&st.details[0].value[..]).unwrap();
        assert_eq!(e0.message, "update 1: bad");
        assert!(
            s.details().len() < 8192,
            "the details fit gRPC's default metadata limit: {} bytes",
            s.details().len()
        );
    }

    const GW: &str = include_str!("../../../programs/ipsec_gateway.p4");

    fn gateway() -> (std::sync::Arc<Device>, Pipeline) {
        let prog = p4sec_frontend::compile_str("ipsec_gateway.p4", GW, &Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let device = Device::new(1, None, p4sec_externs::p4::registry());
        let pl = device
            .build_pipeline(prog.to_json().into_bytes(), None, 0)
            .unwrap();
        (device, pl)
    }

    fn sa_update(pl: &Pipeline, ty: p4::update::Type, op: &str, json: &str) -> p4::Update {
        let entry = p4::ExternEntry {
            extern_type_id: 0,
            extern_id: p4sec_ir::p4info::extern_id("GwIngress.sad"),
            entry: Some(prost_types::Any {
                type_url: format!("p4sec/esp_sad.{op}"),
                value: json.as_bytes().to_vec(),
            }),
        };
        assert!(pl
            .engine
            .prog
            .externs
            .iter()
            .any(|e| e.name == "GwIngress.sad"));
        p4::Update {
            r#type: ty as i32,
            entity: Some(p4::Entity {
                entity: Some(p4::entity::Entity::ExternEntry(entry)),
            }),
        }
    }

    /// A DELETE of an extern entry written with `add_sa` runs the operation the extern type names
    /// as its undo (`esp_sad`: `del_sa`): the server itself knows no extern's operations.
    #[test]
    fn deleting_an_extern_entry_runs_the_externs_undo_operation() {
        let (device, pl) = gateway();
        let sa = r#"{"index": 3, "sa": {"spi": 4096, "cipher": "AesGcm128", "integ": "None",
            "enc_key": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20], "auth_key": [], "esn": false,
            "replay_window": 64, "tunnel": ["10.0.0.1", "10.0.0.2"], "soft": {"packets": null, "bytes": null,
            "seconds": null}, "hard": {"packets": null, "bytes": null, "seconds": null}, "initial_seq": 0}}"#;
        let req = |u| p4::WriteRequest {
            device_id: 1,
            updates: vec![u],
            ..Default::default()
        };
        write(
            &device,
            &pl,
            &req(sa_update(&pl, p4::update::Type::Insert, "add_sa", sa)),
        )
        .unwrap();
        assert!(
            pl.engine
                .extern_control("GwIngress.sad", "sa_stats", br#"{"index": 3}"#)
                .is_ok(),
            "the SA is installed"
        );
        write(
            &device,
            &pl,
            &req(sa_update(
                &pl,
                p4::update::Type::Delete,
                "add_sa",
                r#"{"index": 3}"#,
            )),
        )
        .unwrap();
        let e = pl
            .engine
            .extern_control("GwIngress.sad", "sa_stats", br#"{"index": 3}"#)
            .unwrap_err();
        assert!(e.contains("no SA in slot 3"), "{e}");
    }
}
