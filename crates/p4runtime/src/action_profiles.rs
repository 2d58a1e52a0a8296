//! Action profiles and action selectors over P4Runtime: `ActionProfileMember` and
//! `ActionProfileGroup` entities translated into the engine's profile operations (which keep the
//! members and groups, and rewrite the entries using them), read back, and carried into a new
//! pipeline (RECONCILE_AND_COMMIT).

use crate::codec::{action_call, action_to_p4};
use crate::proto::p4::v1 as p4;
use crate::status::status;
use p4sec_engine::tables::{profile_table, Group, GroupMember, WatchSpec};
use p4sec_engine::Engine;
use p4sec_ir::{ActionCall, ActionProfile, Program, Table};
use tonic::Status;

type Up = p4::update::Type;

type WatchKind = p4::action_profile_group::member::WatchKind;

fn watch_spec(w: &WatchKind) -> WatchSpec {
    match w {
        WatchKind::Watch(p) => WatchSpec::Int(*p),
        WatchKind::WatchPort(b) => WatchSpec::Bytes(b.clone()),
    }
}

fn watch_kind(w: &WatchSpec) -> WatchKind {
    match w {
        WatchSpec::Int(p) => WatchKind::Watch(*p),
        WatchSpec::Bytes(b) => WatchKind::WatchPort(b.clone()),
    }
}

/// The action profile with P4Info id `id`, and its index.
fn profile_of(prog: &Program, id: u32) -> Result<(usize, &ActionProfile), Status> {
    prog.action_profiles
        .iter()
        .enumerate()
        .find(|(_, p)| p.id == id)
        .ok_or_else(|| Status::not_found(format!("no action profile with id {id}")))
}

pub(crate) fn write_member(e: &Engine, ty: Up, m: &p4::ActionProfileMember) -> Result<(), Status> {
    let prog = &e.prog;
    let (pi, ap) = profile_of(prog, m.action_profile_id)?;
    if m.member_id == 0 {
        return Err(Status::invalid_argument(
            "action profile member id 0 is not valid",
        ));
    }
    let mid = m.member_id;
    let exists = e.profile_member(pi, mid).is_some();
    match ty {
        Up::Insert if exists => Err(Status::already_exists(format!(
            "`{}`: member {mid} exists",
            ap.name
        ))),
        Up::Modify | Up::Delete if !exists => {
            Err(Status::not_found(format!("`{}`: no member {mid}", ap.name)))
        }
        Up::Delete => e.profile_member_delete(pi, mid).map_err(status),
        Up::Insert | Up::Modify => {
            let a = m.action.as_ref().ok_or_else(|| {
                Status::invalid_argument(format!("`{}`: member {mid} has no action", ap.name))
            })?;
            let table = profile_table(prog, ap).map_err(status)?;
            let call = action_call(prog, table, a, false)?;
            if ty == Up::Insert {
                e.profile_member_insert(pi, mid, call)
            } else {
                e.profile_member_modify(pi, mid, call)
            }
            .map_err(status)
        }
        Up::Unspecified => Err(Status::invalid_argument("unspecified update type")),
    }
}

pub(crate) fn write_group(e: &Engine, ty: Up, g: &p4::ActionProfileGroup) -> Result<(), Status> {
    let prog = &e.prog;
    let (pi, ap) = profile_of(prog, g.action_profile_id)?;
    if ap.selector.is_none() {
        return Err(Status::invalid_argument(format!(
            "`{}` is an action profile without a selector: it has no groups",
            ap.name
        )));
    }
    if g.group_id == 0 {
        return Err(Status::invalid_argument(
            "action profile group id 0 is not valid",
        ));
    }
    let gid = g.group_id;
    let exists = e.profile_group(pi, gid).is_some();
    match ty {
        Up::Insert if exists => Err(Status::already_exists(format!(
            "`{}`: group {gid} exists",
            ap.name
        ))),
        Up::Modify | Up::Delete if !exists => {
            Err(Status::not_found(format!("`{}`: no group {gid}", ap.name)))
        }
        Up::Delete => e.profile_group_delete(pi, gid).map_err(status),
        Up::Insert | Up::Modify => {
            let group = Group {
                members: g
                    .members
                    .iter()
                    .map(|m| GroupMember {
                        member: m.member_id,
                        weight: m.weight,
                        watch: m.watch_kind.as_ref().map(watch_spec),
                    })
                    .collect(),
                max_size: g.max_size,
            };
            if ty == Up::Insert {
                e.profile_group_insert(pi, gid, group)
            } else {
                e.profile_group_modify(pi, gid, group)
            }
            .map_err(status)
        }
        Up::Unspecified => Err(Status::invalid_argument("unspecified update type")),
    }
}

/// Members of one or all action profiles (`action_profile_id` 0), one or all (`member_id` 0).
pub(crate) fn read_members(
    e: &Engine,
    m: &p4::ActionProfileMember,
    out: &mut Vec<p4::Entity>,
) -> Result<(), Status> {
    let prog = &e.prog;
    if m.action_profile_id != 0 {
        profile_of(prog, m.action_profile_id)?;
    }
    for (pi, mid, a) in e.profile_members() {
        let pid = prog.action_profiles[pi].id;
        if (m.action_profile_id == 0 || pid == m.action_profile_id)
            && (m.member_id == 0 || mid == m.member_id)
        {
            out.push(p4::Entity {
                entity: Some(p4::entity::Entity::ActionProfileMember(
                    p4::ActionProfileMember {
                        action_profile_id: pid,
                        member_id: mid,
                        action: Some(action_to_p4(prog, &a)),
                    },
                )),
            });
        }
    }
    Ok(())
}

/// Groups of one or all action selectors (`action_profile_id` 0), one or all (`group_id` 0).
pub(crate) fn read_groups(
    e: &Engine,
    g: &p4::ActionProfileGroup,
    out: &mut Vec<p4::Entity>,
) -> Result<(), Status> {
    let prog = &e.prog;
    if g.action_profile_id != 0 {
        profile_of(prog, g.action_profile_id)?;
    }
    for (pi, gid, grp) in e.profile_groups() {
        let pid = prog.action_profiles[pi].id;
        if (g.action_profile_id == 0 || pid == g.action_profile_id)
            && (g.group_id == 0 || gid == g.group_id)
        {
            let members = grp
                .members
                .iter()
                .map(|m| p4::action_profile_group::Member {
                    member_id: m.member,
                    weight: m.weight,
                    watch_kind: m.watch.as_ref().map(watch_kind),
                })
                .collect();
            out.push(p4::Entity {
                entity: Some(p4::entity::Entity::ActionProfileGroup(
                    p4::ActionProfileGroup {
                        action_profile_id: pid,
                        group_id: gid,
                        members,
                        max_size: grp.max_size,
                    },
                )),
            });
        }
    }
    Ok(())
}

/// RECONCILE_AND_COMMIT: the members and groups of engine `old` into engine `new`: profiles must
/// exist in the new program with the same id and name, member actions (by name, `map_action`) with
/// the same parameters.
pub(crate) fn reconcile(
    old: &Engine,
    new: &Engine,
    map_action: impl Fn(&ActionCall, &Table) -> Result<ActionCall, Status>,
) -> Result<(), Status> {
    let (op, np) = (&old.prog, &new.prog);
    // old profile index -> (new profile index, the old profile's table)
    let find = |pi: usize| -> Result<(usize, &Table), Status> {
        let oap = &op.action_profiles[pi];
        let ni = np
            .action_profiles
            .iter()
            .position(|p| {
                p.id == oap.id
                    && p.name == oap.name
                    && p.selector.is_some() == oap.selector.is_some()
            })
            .ok_or_else(|| {
                Status::failed_precondition(format!(
                    "action profile `{}` holds members or groups and is not in the new program",
                    oap.name
                ))
            })?;
        Ok((ni, profile_table(op, oap).map_err(status)?))
    };
    let mut members = vec![];
    for (pi, mid, a) in old.profile_members() {
        let (ni, ot) = find(pi)?;
        members.push((ni, mid, map_action(&a, ot)?));
    }
    let mut groups = vec![];
    for (pi, gid, g) in old.profile_groups() {
        groups.push((find(pi)?.0, gid, g));
    }
    new.profiles_restore(members, groups).map_err(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use p4sec_engine::tables::{EntryWrite, PortStatus, TableOp};
    use p4sec_engine::{Outputs, Worker};
    use std::sync::Arc;

    const PROGRAM: &str = include_str!("../../../tests/switch/programs/profiles.p4");

    fn engine() -> Arc<Engine> {
        let prog = p4sec_frontend::compile_str("profiles.p4", PROGRAM, &Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
        Arc::new(Engine::new(Arc::new(prog), &[]).unwrap())
    }

    fn set_sel(e: &Engine, tag: u8) -> p4::Action {
        let a = e
            .prog
            .actions
            .iter()
            .find(|a| a.name == "I.set_sel")
            .unwrap();
        p4::Action {
            action_id: a.id,
            params: vec![p4::action::Param {
                param_id: a.params[0].id,
                value: vec![tag],
            }],
        }
    }

    fn member(e: &Engine, ty: Up, mid: u32, tag: Option<u8>) -> Result<(), Status> {
        let m = p4::ActionProfileMember {
            action_profile_id: e.prog.action_profiles[0].id,
            member_id: mid,
            action: tag.map(|t| set_sel(e, t)),
        };
        write_member(e, ty, &m)
    }

    fn group_watching(
        e: &Engine,
        ty: Up,
        gid: u32,
        members: &[(u32, i32, Option<WatchKind>)],
        max_size: i32,
    ) -> Result<(), Status> {
        let members = members
            .iter()
            .map(|(m, w, watch)| p4::action_profile_group::Member {
                member_id: *m,
                weight: *w,
                watch_kind: watch.clone(),
            })
            .collect();
        write_group(
            e,
            ty,
            &p4::ActionProfileGroup {
                action_profile_id: e.prog.action_profiles[0].id,
                group_id: gid,
                members,
                max_size,
            },
        )
    }

    fn group(
        e: &Engine,
        ty: Up,
        gid: u32,
        members: &[(u32, i32)],
        max_size: i32,
    ) -> Result<(), Status> {
        let members: Vec<_> = members.iter().map(|(m, w)| (*m, *w, None)).collect();
        group_watching(e, ty, gid, &members, max_size)
    }

    /// Insert an entry of `sel_t` for destination 1 with this table action.
    fn sel_entry(e: &Engine, ta: p4::table_action::Type) -> Result<(), Status> {
        let ti = e.table_index("I.sel_t").unwrap();
        let t = &e.prog.tables[ti];
        let target = crate::table_action::profile_target(&e.prog, t, &ta)?;
        let matches = t
            .keys
            .iter()
            .map(|k| {
                if k.kind == p4sec_ir::MatchKind::Selector {
                    p4sec_ir::FieldMatch::Any
                } else {
                    p4sec_ir::FieldMatch::Exact(p4sec_ir::Value::new(48, 1))
                }
            })
            .collect();
        let entry = p4sec_ir::TableEntry {
            matches,
            action: t.default_action.clone(),
            priority: 0,
        };
        let w = EntryWrite {
            target: Some(target),
            ..EntryWrite::new(entry)
        };
        e.tables_apply_atomic(vec![TableOp::Insert(ti, w)])
            .map_err(|(_, e)| status(e))
    }

    /// The selector table's tag for a frame to destination 1 from `src`.
    fn tag(e: &Engine, w: &mut Worker, src: u64) -> u8 {
        let mut f = vec![0u8; 60];
        f[5] = 1;
        f[6..12].copy_from_slice(&src.to_be_bytes()[2..]);
        f[12] = 0x88;
        f[13] = 0xb5;
        let mut out = Outputs::default();
        e.process(w, 1, &f, &mut out);
        let (_, frame) = out.iter().next().expect("a frame to the CPU port");
        frame[2 + 14] // after the packet_in header and Ethernet: result.sel_tag
    }

    #[test]
    fn groups_select_per_flow_and_follow_member_changes() {
        let e = engine();
        let mut w = Worker::new(&e);
        let ports = Arc::new(PortStatus::default());
        e.profile_ports(ports.clone());
        for m in 1..=3 {
            member(&e, Up::Insert, m, Some(m as u8)).unwrap();
        }
        group(&e, Up::Insert, 7, &[(1, 1), (2, 1), (3, 1)], 0).unwrap();
        sel_entry(&e, p4::table_action::Type::ActionProfileGroupId(7)).unwrap();
        let tags: Vec<u8> = (0..30)
            .map(|s| tag(&e, &mut w, 0x0200_0000_0000 + s))
            .collect();
        assert!(tags.iter().all(|t| (1..=3).contains(t)), "{tags:?}");
        assert!((1..=3).all(|m| tags.contains(&m)), "{tags:?}");
        assert_eq!(
            tags,
            (0..30)
                .map(|s| tag(&e, &mut w, 0x0200_0000_0000 + s))
                .collect::<Vec<_>>()
        );
        // a member's new action reaches the entries of its groups
        member(&e, Up::Modify, 2, Some(20)).unwrap();
        let after: Vec<u8> = (0..30)
            .map(|s| tag(&e, &mut w, 0x0200_0000_0000 + s))
            .collect();
        assert_eq!(
            after,
            tags.iter()
                .map(|t| if *t == 2 { 20 } else { *t })
                .collect::<Vec<_>>()
        );
        // in use: FAILED_PRECONDITION; unknown: NOT_FOUND; duplicates: ALREADY_EXISTS
        assert_eq!(
            member(&e, Up::Delete, 1, None).unwrap_err().code(),
            tonic::Code::FailedPrecondition
        );
        assert_eq!(
            group(&e, Up::Delete, 7, &[], 0).unwrap_err().code(),
            tonic::Code::FailedPrecondition
        );
        assert_eq!(
            member(&e, Up::Modify, 9, Some(1)).unwrap_err().code(),
            tonic::Code::NotFound
        );
        assert_eq!(
            member(&e, Up::Insert, 1, Some(1)).unwrap_err().code(),
            tonic::Code::AlreadyExists
        );
        assert_eq!(
            group(&e, Up::Insert, 8, &[(4, 1)], 0).unwrap_err().code(),
            tonic::Code::NotFound
        );
        assert_eq!(
            group(&e, Up::Insert, 8, &[(1, 0)], 0).unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            group(&e, Up::Modify, 7, &[(1, 1)], 3).unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            group(&e, Up::Insert, 8, &[(1, 40), (2, 40)], 0)
                .unwrap_err()
                .code(),
            tonic::Code::ResourceExhausted
        );
        // watch ports: a member whose port is down is left out of the choice, and back when it is
        // up
        ports.set(3, true);
        let watched = [
            (1, 1, Some(WatchKind::WatchPort(vec![3]))),
            (2, 1, None),
            (3, 1, Some(WatchKind::Watch(4))),
        ];
        group_watching(&e, Up::Modify, 7, &watched, 0).unwrap();
        let tags: Vec<u8> = (0..30)
            .map(|s| tag(&e, &mut w, 0x0200_0000_0000 + s))
            .collect();
        assert!(
            tags.iter().all(|t| [1, 20].contains(t)) && tags.contains(&1),
            "{tags:?}"
        );
        ports.set(3, false);
        e.profile_port_changed(3).unwrap();
        assert!((0..30).all(|s| tag(&e, &mut w, 0x0200_0000_0000 + s) == 20));
        ports.set(4, true);
        e.profile_port_changed(4).unwrap();
        let tags: Vec<u8> = (0..30)
            .map(|s| tag(&e, &mut w, 0x0200_0000_0000 + s))
            .collect();
        assert!(
            tags.contains(&3) && tags.contains(&20) && !tags.contains(&1),
            "{tags:?}"
        );
        // the watch ports read back as written
        let mut out = vec![];
        read_groups(&e, &p4::ActionProfileGroup::default(), &mut out).unwrap();
        let Some(p4::entity::Entity::ActionProfileGroup(g)) = &out[0].entity else {
            panic!("{out:?}")
        };
        let read: Vec<_> = g.members.iter().map(|m| m.watch_kind.clone()).collect();
        assert_eq!(read, watched.map(|(_, _, w)| w));
        assert_eq!(
            watch_spec(&WatchKind::WatchPort(vec![1, 2, 3, 4, 5]))
                .port()
                .unwrap_err(),
            "watch_port has 5 bytes; ports have at most 4"
        );
        // an empty group misses (the default action leaves the tag at 0)
        group(&e, Up::Modify, 7, &[], 0).unwrap();
        assert_eq!(tag(&e, &mut w, 0x0200_0000_0000 + 1), 0);
    }
}
