//! RECONCILE_AND_COMMIT: the forwarding state of the installed pipeline carried into a new one.

use crate::status::status;
use p4sec_engine::tables::{EntryWrite, ProfileTarget, TableOp};
use p4sec_engine::Engine;
use p4sec_ir::{ActionCall, Program, Table, TableEntry};
use tonic::Status;

/// RECONCILE_AND_COMMIT: carry the forwarding state of `old` into `new`. Table entries move to the
/// table of the same name and id when its keys are the same and their actions (by name) exist with
/// the same parameters; action profile members and groups move to the profile of the same name and
/// id, and the entries that use them with them; direct meter configurations stay with their
/// entries; registers and counters of the same name and shape keep their values; multicast groups
/// and clone sessions are kept. Anything that cannot be carried over is an error and nothing
/// changes.
pub(crate) fn reconcile(old: &Engine, new: &Engine) -> Result<(), Status> {
    let (op, np) = (&old.prog, &new.prog);
    let map_action = |a: &ActionCall, t: &Table| -> Result<ActionCall, Status> {
        let name = &op.actions[a.action as usize].name;
        let ni = np
            .actions
            .iter()
            .position(|x| &x.name == name)
            .ok_or_else(|| {
                Status::failed_precondition(format!(
                    "table `{}`: action `{name}` is not in the new program",
                    t.name
                ))
            })?;
        let (oa, na) = (&op.actions[a.action as usize], &np.actions[ni]);
        if oa
            .params
            .iter()
            .map(|p| p.loc.width)
            .ne(na.params.iter().map(|p| p.loc.width))
        {
            return Err(Status::failed_precondition(format!(
                "action `{name}` has other parameters in the new program"
            )));
        }
        Ok(ActionCall {
            action: ni as u32,
            args: a.args.clone(),
        })
    };
    crate::action_profiles::reconcile(old, new, map_action)?;
    let profile_id = |p: &Program, t: &Table| match t.implementation {
        p4sec_ir::Implementation::ActionProfile(i)
        | p4sec_ir::Implementation::ActionSelector(i) => {
            p.action_profiles.get(i as usize).map(|x| x.id)
        }
        p4sec_ir::Implementation::None => None,
    };
    for (oti, ot) in op.tables.iter().enumerate() {
        let entries = old.table_read(oti).map_err(status)?;
        let default = old.table_default(oti).map_err(Status::internal)?;
        let Some(nti) = np
            .tables
            .iter()
            .position(|t| t.name == ot.name && t.id == ot.id)
        else {
            if entries.is_empty() || ot.entries_are_const {
                continue;
            }
            return Err(Status::failed_precondition(format!(
                "table `{}` holds entries and is not in the new program",
                ot.name
            )));
        };
        let nt = &np.tables[nti];
        let same_keys = ot.keys.len() == nt.keys.len()
            && ot
                .keys
                .iter()
                .zip(&nt.keys)
                .all(|(a, b)| a.id == b.id && a.width == b.width && a.kind == b.kind);
        if ot.entries_are_const || nt.entries_are_const {
            continue;
        }
        if !same_keys && !entries.is_empty() {
            return Err(Status::failed_precondition(format!(
                "table `{}` has other keys in the new program",
                ot.name
            )));
        }
        let (opid, npid) = (profile_id(op, ot), profile_id(np, nt));
        if opid != npid && !entries.is_empty() {
            return Err(Status::failed_precondition(format!(
                "table `{}` has another implementation (action profile) in the new program",
                ot.name
            )));
        }
        let mut moved = vec![];
        for x in entries {
            let meter = if nt.direct_meter.is_some() {
                x.meter.and_then(|(rates, _)| rates)
            } else {
                None
            };
            let e = x.entry;
            let w = match (x.target, npid) {
                (Some(target), Some(_)) => {
                    let target = match target {
                        ProfileTarget::ActionSet(choices) => ProfileTarget::ActionSet(
                            choices
                                .iter()
                                .map(|(a, w)| Ok((map_action(a, ot)?, *w)))
                                .collect::<Result<Vec<_>, Status>>()?,
                        ),
                        r => r,
                    };
                    EntryWrite {
                        target: Some(target),
                        ..EntryWrite::new(TableEntry {
                            action: nt.default_action.clone(),
                            ..e
                        })
                    }
                }
                _ => {
                    let e = TableEntry {
                        action: map_action(&e.action, ot)?,
                        ..e
                    };
                    p4sec_engine::tables::validate_entry(np, nt, &e).map_err(|m| {
                        Status::failed_precondition(format!(
                            "cannot keep an entry of `{}`: {m}",
                            ot.name
                        ))
                    })?;
                    EntryWrite::new(e)
                }
            };
            moved.push(TableOp::Insert(
                nti,
                EntryWrite {
                    meter: Some(meter),
                    ..w
                },
            ));
        }
        if let Some(d) = map_action(&default, ot)
            .ok()
            .filter(|d| !nt.default_is_const || *d == nt.default_action)
        {
            moved.push(TableOp::SetDefault(nti, d));
        }
        new.tables_apply_atomic(moved)
            .map_err(|(_, e)| match e.kind {
                p4sec_engine::tables::TableErrorKind::NotFound => status(e),
                _ => Status::failed_precondition(e.message),
            })?;
    }
    for (ri, r) in op.registers.iter().enumerate() {
        if let Some(ni) = np
            .registers
            .iter()
            .position(|x| x.name == r.name && x.width == r.width && x.size == r.size)
        {
            for i in 0..r.size as usize {
                let v = old.register_read(ri, i).map_err(Status::internal)?;
                new.register_write(ni, i, &v).map_err(Status::internal)?;
            }
        }
    }
    for (ci, c) in op.counters.iter().enumerate() {
        if let Some(ni) = np
            .counters
            .iter()
            .position(|x| x.name == c.name && x.size == c.size)
        {
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
    Ok(())
}
