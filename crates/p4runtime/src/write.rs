//! The Write path: a request's updates dispatched per entity. Table entry updates become engine
//! changes (`entry_updates.rs`) applied per table as one new table version each (or all together
//! for the atomic modes); the other entities are applied one by one, in order, before them; the
//! response with its per-update errors is built by `write_response.rs`.

use crate::codec::{default_action, table_of};
use crate::device::{Device, Pipeline};
use crate::entry_updates::{prepare_entry, write_atomic};
use crate::proto::p4::v1 as p4;
use crate::status::status;
use crate::write_response::write_response;
use std::collections::HashMap;
use tonic::Status;

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
    tr.collect(&pl.engine);
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
    let _writing = device.writes.lock().unwrap_or_else(|p| p.into_inner());
    if atomicity != p4::write_request::Atomicity::ContinueOnError {
        let results = if failed.is_empty() {
            write_atomic(&pl.engine, &r.updates)
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
    // Table entry updates are handed to the engine as one batch, which it applies per table as one
    // new table version each (its RCU write), after everything else, which is applied one by one
    // (so entries see the members and groups of the same batch). Results keep the update order.
    let mut results: Vec<Option<Result<(), Status>>> = (0..r.updates.len()).map(|_| None).collect();
    let mut ops = vec![];
    let mut op_update = vec![];
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
                    prepare_entry(&prog, ti, t, te, ty)
                });
                match r {
                    Ok(op) => {
                        ops.push(op);
                        op_update.push(i);
                    }
                    Err(s) => results[i] = Some(Err(s)),
                }
                continue;
            }
        }
        results[i] = Some(apply_update(device, pl, u));
    }
    for (i, r) in op_update.into_iter().zip(pl.engine.tables_apply(ops)) {
        results[i] = Some(r.map_err(status));
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
        let held = pl.engine.table_len(ti).unwrap_or(0) as u64;
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

fn apply_update(device: &Device, pl: &Pipeline, u: &p4::Update) -> Result<(), Status> {
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
        p4::entity::Entity::RegisterEntry(r) => {
            crate::indexed_entities::write_register(&pl.engine, ty, r)
        }
        p4::entity::Entity::CounterEntry(c) => {
            crate::indexed_entities::write_counter(&pl.engine, ty, c)
        }
        p4::entity::Entity::MeterEntry(m) => {
            crate::indexed_entities::write_meter(&pl.engine, ty, m)
        }
        p4::entity::Entity::PacketReplicationEngineEntry(p) => {
            crate::replication::write_pre(&pl.engine, ty, p)
        }
        p4::entity::Entity::DigestEntry(d) => device.write_digest_entry(prog, ty, d),
        p4::entity::Entity::DirectCounterEntry(d) => {
            crate::direct_entities::write_direct_counter(&pl.engine, ty, d)
        }
        p4::entity::Entity::ValueSetEntry(v) => {
            crate::value_sets::write_value_set(&pl.engine, ty, v)
        }
        p4::entity::Entity::ActionProfileMember(m) => {
            crate::action_profiles::write_member(&pl.engine, ty, m)
        }
        p4::entity::Entity::ActionProfileGroup(g) => {
            crate::action_profiles::write_group(&pl.engine, ty, g)
        }
        p4::entity::Entity::DirectMeterEntry(d) => {
            crate::direct_entities::write_direct_meter(&pl.engine, ty, d)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
