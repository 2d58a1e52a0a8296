//! RECONCILE_AND_COMMIT: the forwarding state of the installed pipeline carried into a new one.

use crate::profiles::ProfileState;
use p4sec_engine::Engine;
use p4sec_ir::{ActionCall, Program, Table, TableEntry};
use std::sync::Arc;
use tonic::Status;

/// RECONCILE_AND_COMMIT: carry the forwarding state of `old` into `new`. Table entries move to the
/// table of the same name and id when its keys are the same and their actions (by name) exist with
/// the same parameters; action profile members and groups move to the profile of the same name and
/// id, and the entries that use them with them; direct meter configurations stay with their
/// entries; registers and counters of the same name and shape keep their values; multicast groups
/// and clone sessions are kept. Anything that cannot be carried over is an error and nothing
/// changes. Returns the new profile state.
pub(crate) fn reconcile(
    old: &Engine,
    new: &Engine,
    profiles: &ProfileState,
) -> Result<ProfileState, Status> {
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
    let st = crate::profiles::reconcile(op, np, profiles, map_action)?;
    let profile_id = |p: &Program, t: &Table| match t.implementation {
        p4sec_ir::Implementation::ActionProfile(i)
        | p4sec_ir::Implementation::ActionSelector(i) => {
            p.action_profiles.get(i as usize).map(|x| x.id)
        }
        p4sec_ir::Implementation::None => None,
    };
    for (oti, ot) in op.tables.iter().enumerate() {
        let entries = old
            .table_snapshot(oti)
            .map_err(Status::internal)?
            .entries
            .clone();
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
        for x in &entries {
            let meter = if nt.direct_meter.is_some() {
                x.meter.as_ref().and_then(|m| m.rates())
            } else {
                None
            };
            let e = x.entry.clone();
            match (&x.indirect, npid) {
                (Some(ind), Some(pid)) => {
                    let (action, ind) = match ind.reference {
                        p4sec_engine::tables::ProfileRef::ActionSet => {
                            let choices = ind
                                .choices
                                .iter()
                                .map(|(a, w)| Ok((map_action(a, ot)?, *w)))
                                .collect::<Result<Vec<_>, Status>>()?;
                            let first = choices
                                .first()
                                .map(|(a, _)| a.clone())
                                .unwrap_or_else(|| nt.default_action.clone());
                            (
                                first,
                                Some(Arc::new(p4sec_engine::tables::Indirect::new(
                                    ind.reference,
                                    choices,
                                ))),
                            )
                        }
                        r => crate::profiles::resolve(nt, &st, pid, r)?,
                    };
                    moved.push((TableEntry { action, ..e }, ind, meter));
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
                    moved.push((e, None, meter));
                }
            }
        }
        let d = map_action(&default, ot)
            .ok()
            .filter(|d| !nt.default_is_const || *d == nt.default_action);
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
    Ok(st)
}
