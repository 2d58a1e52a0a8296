//! Action profiles and action selectors over P4Runtime: `ActionProfileMember` and
//! `ActionProfileGroup` entities, and the entries of indirect tables (`TableAction` member id,
//! group id or one-shot action set).
//!
//! Members and groups live here, per pipeline; the engine's entries carry what they refer to
//! together with the resolved actions (a member's action, or a group's weighted members chosen per
//! packet by the selector hash), so changing a member or group rewrites the entries that use it.

use crate::codec::{action_call, action_to_p4};
use crate::proto::p4::v1 as p4;
use p4sec_engine::tables::{Indirect, ProfileRef};
use p4sec_engine::Engine;
use p4sec_ir::{ActionCall, ActionProfile, Implementation, Program, Table};
use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use tonic::Status;

type Up = p4::update::Type;

type WatchKind = p4::action_profile_group::member::WatchKind;

/// A group: its members (member id, weight), each member's watch port as written (`watch_port` or
/// the deprecated `watch`) and the `max_size` it was inserted with.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Group {
    pub members: Vec<(u32, u32)>,
    pub watch: Vec<Option<WatchKind>>,
    pub max_size: i32,
}

impl Group {
    /// The port member `i` watches, if any.
    fn watch_port(&self, i: usize) -> Option<u32> {
        self.watch
            .get(i)
            .and_then(|w| w.as_ref())
            .and_then(|w| watch_port(w).ok().flatten())
    }
}

/// The port a watch names: `watch` (int32; 0 is unset) or `watch_port` (bytes, big-endian, at most
/// 4; empty is unset).
fn watch_port(w: &WatchKind) -> Result<Option<u32>, String> {
    match w {
        WatchKind::Watch(0) => Ok(None),
        WatchKind::Watch(p) if *p < 0 => Err(format!("watch port {p} is negative")),
        WatchKind::Watch(p) => Ok(Some(*p as u32)),
        WatchKind::WatchPort(b) if b.is_empty() => Ok(None),
        WatchKind::WatchPort(b) if b.len() > 4 => Err(format!(
            "watch_port has {} bytes; ports have at most 4",
            b.len()
        )),
        WatchKind::WatchPort(b) => Ok(Some(b.iter().fold(0u32, |a, x| (a << 8) | *x as u32))),
    }
}

/// Which ports are up, as the data plane reports them (once a second); a port it never reported (no
/// such port) is down.
#[derive(Debug, Default)]
pub struct PortStatus(std::sync::RwLock<std::collections::HashMap<u32, bool>>);

impl PortStatus {
    pub fn is_up(&self, port: u32) -> bool {
        self.0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&port)
            .copied()
            .unwrap_or(false)
    }
    /// Record a port's state; true when it changed.
    pub fn set(&self, port: u32, up: bool) -> bool {
        self.0
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(port, up)
            != Some(up)
    }
}

/// Members and groups of every action profile of one pipeline, keyed by (action profile id, member
/// or group id), and the device's port states (watch ports).
#[derive(Clone, Debug, Default)]
pub(crate) struct ProfileState {
    pub members: BTreeMap<(u32, u32), ActionCall>,
    pub groups: BTreeMap<(u32, u32), Group>,
    pub ports: Arc<PortStatus>,
}

impl ProfileState {
    fn in_profile<V>(
        m: &BTreeMap<(u32, u32), V>,
        pid: u32,
    ) -> impl Iterator<Item = (&(u32, u32), &V)> {
        m.range((pid, 0)..=(pid, u32::MAX))
    }
    fn is_empty_for(&self, pid: u32) -> bool {
        Self::in_profile(&self.members, pid).next().is_none()
            && Self::in_profile(&self.groups, pid).next().is_none()
    }
}

/// The profile state of the installed pipeline; a new pipeline (another engine) starts empty.
#[derive(Default)]
pub(crate) struct Profiles {
    engine: Weak<Engine>,
    state: ProfileState,
    ports: Arc<PortStatus>,
}

impl Profiles {
    pub fn with_ports(ports: Arc<PortStatus>) -> Profiles {
        Profiles {
            engine: Weak::new(),
            state: ProfileState {
                ports: ports.clone(),
                ..Default::default()
            },
            ports,
        }
    }
    pub fn for_engine(&mut self, e: &Arc<Engine>) -> &mut ProfileState {
        if !std::ptr::eq(self.engine.as_ptr(), Arc::as_ptr(e)) {
            self.engine = Arc::downgrade(e);
            self.state = ProfileState {
                ports: self.ports.clone(),
                ..Default::default()
            };
        }
        &mut self.state
    }
    pub fn set(&mut self, e: &Arc<Engine>, state: ProfileState) {
        self.engine = Arc::downgrade(e);
        self.state = ProfileState {
            ports: self.ports.clone(),
            ..state
        };
    }
}

/// A port went up or down: the entries using groups with members watching it choose again among the
/// members whose watch ports are up.
pub(crate) fn watch_changed(e: &Engine, st: &ProfileState, port: u32) -> Result<(), Status> {
    for ap in e
        .prog
        .action_profiles
        .iter()
        .filter(|a| a.selector.is_some())
    {
        let gids: Vec<u32> = ProfileState::in_profile(&st.groups, ap.id)
            .filter(|(_, g)| (0..g.members.len()).any(|i| g.watch_port(i) == Some(port)))
            .map(|((_, gid), _)| *gid)
            .collect();
        if !gids.is_empty() {
            refresh(
                e,
                st,
                ap,
                |r| matches!(r, ProfileRef::Group(g) if gids.contains(g)),
            )?;
        }
    }
    Ok(())
}

fn profile_of(prog: &Program, id: u32) -> Result<&ActionProfile, Status> {
    prog.action_profiles
        .iter()
        .find(|p| p.id == id)
        .ok_or_else(|| Status::not_found(format!("no action profile with id {id}")))
}

/// The table whose actions the profile's members take (tables sharing a profile have the same
/// actions).
fn profile_table<'a>(prog: &'a Program, ap: &ActionProfile) -> Result<&'a Table, Status> {
    ap.tables
        .first()
        .and_then(|t| prog.tables.get(*t as usize))
        .ok_or_else(|| {
            Status::failed_precondition(format!("action profile `{}` implements no table", ap.name))
        })
}

fn profile_of_table<'a>(prog: &'a Program, t: &Table) -> Option<&'a ActionProfile> {
    match t.implementation {
        Implementation::ActionProfile(p) | Implementation::ActionSelector(p) => {
            prog.action_profiles.get(p as usize)
        }
        Implementation::None => None,
    }
}

/// A table entry of the profile's tables that refers to something `pred` accepts, as "table
/// `name`".
fn entry_using(
    e: &Engine,
    ap: &ActionProfile,
    pred: impl Fn(&ProfileRef) -> bool,
) -> Option<String> {
    for &ti in &ap.tables {
        let Ok(snap) = e.table_snapshot(ti as usize) else {
            continue;
        };
        if snap
            .entries
            .iter()
            .any(|x| x.indirect.as_ref().is_some_and(|i| pred(&i.reference)))
        {
            return Some(e.prog.tables[ti as usize].name.clone());
        }
    }
    None
}

/// What a member or group reference executes: the action an entry runs on a hit and, for groups,
/// the weighted actions a packet chooses from. An empty group keeps the table's default action (and
/// misses).
pub(crate) fn resolve(
    t: &Table,
    st: &ProfileState,
    pid: u32,
    r: ProfileRef,
) -> Result<(ActionCall, Option<Arc<Indirect>>), Status> {
    match r {
        ProfileRef::Member(mid) => {
            let a = st.members.get(&(pid, mid)).ok_or_else(|| {
                Status::not_found(format!(
                    "table `{}`: no action profile member {mid}",
                    t.name
                ))
            })?;
            Ok((a.clone(), Some(Arc::new(Indirect::new(r, vec![])))))
        }
        ProfileRef::Group(gid) => {
            let g = st.groups.get(&(pid, gid)).ok_or_else(|| {
                Status::not_found(format!("table `{}`: no action profile group {gid}", t.name))
            })?;
            let mut choices = vec![];
            for (i, (mid, w)) in g.members.iter().enumerate() {
                let a = st.members.get(&(pid, *mid)).ok_or_else(|| {
                    Status::internal(format!(
                        "group {gid} holds member {mid}, which does not exist"
                    ))
                })?;
                // a member whose watch port is down is left out until the port is up again
                if g.watch_port(i).is_some_and(|p| !st.ports.is_up(p)) {
                    continue;
                }
                choices.push((a.clone(), *w));
            }
            let action = choices
                .first()
                .map(|(a, _)| a.clone())
                .unwrap_or_else(|| t.default_action.clone());
            Ok((action, Some(Arc::new(Indirect::new(r, choices)))))
        }
        ProfileRef::ActionSet => Err(Status::internal(
            "a one-shot action set is not kept in the action profile",
        )),
    }
}

fn no_watch(watch: bool, what: &str) -> Result<(), Status> {
    if watch {
        return Err(Status::unimplemented(format!("{what}: watch ports of one-shot action sets are not supported (those of group members are)")));
    }
    Ok(())
}

/// The engine action of a table entry of table `t` from its P4Runtime `TableAction`.
pub(crate) fn entry_action(
    prog: &Program,
    t: &Table,
    st: &ProfileState,
    ta: &p4::table_action::Type,
) -> Result<(ActionCall, Option<Arc<Indirect>>), Status> {
    use p4::table_action::Type as A;
    let Some(ap) = profile_of_table(prog, t) else {
        return match ta {
            A::Action(a) => Ok((action_call(prog, t, a, false)?, None)),
            _ => Err(Status::invalid_argument(format!(
                "table `{}` has no action profile: its entries take an action, not a member, group or action set",
                t.name
            ))),
        };
    };
    let selector = matches!(t.implementation, Implementation::ActionSelector(_));
    match ta {
        A::Action(_) => Err(Status::invalid_argument(format!(
            "table `{}` is implemented by `{}`: its entries name an action profile member{}",
            t.name,
            ap.name,
            if selector {
                ", group or action set"
            } else {
                ""
            }
        ))),
        A::ActionProfileMemberId(mid) => resolve(t, st, ap.id, ProfileRef::Member(*mid)),
        A::ActionProfileGroupId(_) | A::ActionProfileActionSet(_) if !selector => {
            Err(Status::invalid_argument(format!(
                "table `{}`: `{}` is an action profile without a selector: entries name members",
                t.name, ap.name
            )))
        }
        A::ActionProfileGroupId(gid) => resolve(t, st, ap.id, ProfileRef::Group(*gid)),
        A::ActionProfileActionSet(set) => {
            if !st.is_empty_for(ap.id) {
                return Err(Status::invalid_argument(format!(
                    "table `{}`: `{}` is programmed with members and groups; one-shot action sets cannot be mixed with them",
                    t.name, ap.name
                )));
            }
            if set.action_profile_actions.is_empty() {
                return Err(Status::invalid_argument(format!(
                    "table `{}`: the action set is empty",
                    t.name
                )));
            }
            let mut choices = vec![];
            for x in &set.action_profile_actions {
                let a = x.action.as_ref().ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "table `{}`: an action of the action set has no action",
                        t.name
                    ))
                })?;
                if x.weight <= 0 {
                    return Err(Status::invalid_argument(format!(
                        "table `{}`: action set weights must be positive (got {})",
                        t.name, x.weight
                    )));
                }
                // (one-shot action sets are rewritten by the controller, which may leave members
                // out itself)
                no_watch(
                    match &x.watch_kind {
                        Some(p4::action_profile_action::WatchKind::Watch(w)) => *w != 0,
                        Some(p4::action_profile_action::WatchKind::WatchPort(p)) => !p.is_empty(),
                        None => false,
                    },
                    &t.name,
                )?;
                choices.push((action_call(prog, t, a, false)?, x.weight as u32));
            }
            let action = choices[0].0.clone();
            Ok((
                action,
                Some(Arc::new(Indirect::new(ProfileRef::ActionSet, choices))),
            ))
        }
    }
}

/// The P4Runtime `TableAction` of an indirect entry (read back as it was written).
pub(crate) fn table_action_of(prog: &Program, ind: &Indirect) -> p4::TableAction {
    use p4::table_action::Type as A;
    let ty = match ind.reference {
        ProfileRef::Member(m) => A::ActionProfileMemberId(m),
        ProfileRef::Group(g) => A::ActionProfileGroupId(g),
        ProfileRef::ActionSet => A::ActionProfileActionSet(p4::ActionProfileActionSet {
            action_profile_actions: ind
                .choices
                .iter()
                .map(|(a, w)| p4::ActionProfileAction {
                    action: Some(action_to_p4(prog, a)),
                    weight: *w as i32,
                    watch_kind: None,
                })
                .collect(),
        }),
    };
    p4::TableAction { r#type: Some(ty) }
}

/// Rewrite the entries of the profile's tables that refer to a changed member or group.
fn refresh(
    e: &Engine,
    st: &ProfileState,
    ap: &ActionProfile,
    affected: impl Fn(&ProfileRef) -> bool,
) -> Result<(), Status> {
    for &ti in &ap.tables {
        let ti = ti as usize;
        let snap = e.table_snapshot(ti).map_err(Status::internal)?;
        if !snap
            .entries
            .iter()
            .any(|x| x.indirect.as_ref().is_some_and(|i| affected(&i.reference)))
        {
            continue;
        }
        let mut err = None;
        let _ = e.table_update(ti, |t, d| {
            for i in 0..d.entries.len() {
                let Some(r) = d.entries[i]
                    .indirect
                    .as_ref()
                    .map(|x| x.reference)
                    .filter(|r| affected(r))
                else {
                    continue;
                };
                match resolve(t, st, ap.id, r) {
                    Ok((a, ind)) => d.set_indirect(i, a, ind),
                    Err(s) => err = Some(s),
                }
            }
            Ok(())
        });
        if let Some(s) = err {
            return Err(s);
        }
    }
    Ok(())
}

pub(crate) fn write_member(
    e: &Engine,
    st: &mut ProfileState,
    ty: Up,
    m: &p4::ActionProfileMember,
) -> Result<(), Status> {
    let prog = &e.prog;
    let ap = profile_of(prog, m.action_profile_id)?;
    if m.member_id == 0 {
        return Err(Status::invalid_argument(
            "action profile member id 0 is not valid",
        ));
    }
    let (pid, mid) = (ap.id, m.member_id);
    let exists = st.members.contains_key(&(pid, mid));
    match ty {
        Up::Insert if exists => Err(Status::already_exists(format!(
            "`{}`: member {mid} exists",
            ap.name
        ))),
        Up::Modify | Up::Delete if !exists => {
            Err(Status::not_found(format!("`{}`: no member {mid}", ap.name)))
        }
        Up::Delete => {
            if let Some(((_, gid), _)) = ProfileState::in_profile(&st.groups, pid)
                .find(|(_, g)| g.members.iter().any(|(x, _)| *x == mid))
            {
                return Err(Status::failed_precondition(format!(
                    "`{}`: member {mid} is in group {gid}",
                    ap.name
                )));
            }
            if let Some(t) = entry_using(e, ap, |r| *r == ProfileRef::Member(mid)) {
                return Err(Status::failed_precondition(format!(
                    "`{}`: member {mid} is used by an entry of table `{t}`",
                    ap.name
                )));
            }
            st.members.remove(&(pid, mid));
            Ok(())
        }
        Up::Insert | Up::Modify => {
            let a = m.action.as_ref().ok_or_else(|| {
                Status::invalid_argument(format!("`{}`: member {mid} has no action", ap.name))
            })?;
            let call = action_call(prog, profile_table(prog, ap)?, a, false)?;
            if ty == Up::Insert {
                if ProfileState::in_profile(&st.members, pid).count() >= ap.size as usize {
                    return Err(Status::resource_exhausted(format!(
                        "`{}` holds at most {} members",
                        ap.name, ap.size
                    )));
                }
                if st.is_empty_for(pid) {
                    if let Some(t) = entry_using(e, ap, |r| *r == ProfileRef::ActionSet) {
                        return Err(Status::invalid_argument(format!(
                            "`{}`: table `{t}` is programmed with one-shot action sets; members and groups cannot be mixed with them",
                            ap.name
                        )));
                    }
                }
                st.members.insert((pid, mid), call);
                return Ok(());
            }
            st.members.insert((pid, mid), call);
            let groups: Vec<u32> = ProfileState::in_profile(&st.groups, pid)
                .filter(|(_, g)| g.members.iter().any(|(x, _)| *x == mid))
                .map(|((_, g), _)| *g)
                .collect();
            refresh(e, st, ap, |r| {
                *r == ProfileRef::Member(mid)
                    || matches!(r, ProfileRef::Group(g) if groups.contains(g))
            })
        }
        Up::Unspecified => Err(Status::invalid_argument("unspecified update type")),
    }
}

pub(crate) fn write_group(
    e: &Engine,
    st: &mut ProfileState,
    ty: Up,
    g: &p4::ActionProfileGroup,
) -> Result<(), Status> {
    let prog = &e.prog;
    let ap = profile_of(prog, g.action_profile_id)?;
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
    let (pid, gid) = (ap.id, g.group_id);
    let old = st.groups.get(&(pid, gid));
    match ty {
        Up::Insert if old.is_some() => Err(Status::already_exists(format!(
            "`{}`: group {gid} exists",
            ap.name
        ))),
        Up::Modify | Up::Delete if old.is_none() => {
            Err(Status::not_found(format!("`{}`: no group {gid}", ap.name)))
        }
        Up::Delete => {
            if let Some(t) = entry_using(e, ap, |r| *r == ProfileRef::Group(gid)) {
                return Err(Status::failed_precondition(format!(
                    "`{}`: group {gid} is used by an entry of table `{t}`",
                    ap.name
                )));
            }
            st.groups.remove(&(pid, gid));
            Ok(())
        }
        Up::Insert | Up::Modify => {
            if let Some(o) = old {
                if o.max_size != g.max_size {
                    return Err(Status::invalid_argument(format!(
                        "`{}`: group {gid} was inserted with max_size {}; it cannot change",
                        ap.name, o.max_size
                    )));
                }
            }
            if g.max_size < 0 {
                return Err(Status::invalid_argument(format!(
                    "`{}`: max_size cannot be negative",
                    ap.name
                )));
            }
            if g.max_size as u64 > ap.size as u64 {
                return Err(Status::resource_exhausted(format!(
                    "`{}`: groups hold at most {} (sum of weights), max_size {} is too large",
                    ap.name, ap.size, g.max_size
                )));
            }
            let mut members: Vec<(u32, u32)> = vec![];
            let mut watch = vec![];
            for m in &g.members {
                if members.iter().any(|(x, _)| *x == m.member_id) {
                    return Err(Status::invalid_argument(format!(
                        "`{}`: member {} is given twice in group {gid} (use its weight)",
                        ap.name, m.member_id
                    )));
                }
                if m.weight <= 0 {
                    return Err(Status::invalid_argument(format!(
                        "`{}`: member {} of group {gid} has weight {}; weights must be positive",
                        ap.name, m.member_id, m.weight
                    )));
                }
                if let Some(w) = &m.watch_kind {
                    watch_port(w).map_err(|e| {
                        Status::invalid_argument(format!(
                            "`{}`: member {} of group {gid}: {e}",
                            ap.name, m.member_id
                        ))
                    })?;
                }
                if !st.members.contains_key(&(pid, m.member_id)) {
                    return Err(Status::not_found(format!(
                        "`{}`: group {gid} names member {}, which does not exist",
                        ap.name, m.member_id
                    )));
                }
                members.push((m.member_id, m.weight as u32));
                watch.push(m.watch_kind.clone());
            }
            let limit = if g.max_size > 0 {
                g.max_size as u64
            } else {
                ap.size as u64
            };
            let sum: u64 = members.iter().map(|(_, w)| *w as u64).sum();
            if sum > limit {
                return Err(Status::resource_exhausted(format!(
                    "`{}`: group {gid} would hold {sum} (sum of weights), at most {limit}",
                    ap.name
                )));
            }
            if old.is_none()
                && ProfileState::in_profile(&st.groups, pid).count() >= ap.size as usize
            {
                return Err(Status::resource_exhausted(format!(
                    "`{}` holds at most {} groups",
                    ap.name, ap.size
                )));
            }
            let modify = old.is_some();
            st.groups.insert(
                (pid, gid),
                Group {
                    members,
                    watch,
                    max_size: g.max_size,
                },
            );
            if modify {
                refresh(e, st, ap, |r| *r == ProfileRef::Group(gid))?;
            }
            Ok(())
        }
        Up::Unspecified => Err(Status::invalid_argument("unspecified update type")),
    }
}

/// Members of one or all action profiles (`action_profile_id` 0), one or all (`member_id` 0).
pub(crate) fn read_members(
    prog: &Program,
    st: &ProfileState,
    m: &p4::ActionProfileMember,
    out: &mut Vec<p4::Entity>,
) -> Result<(), Status> {
    if m.action_profile_id != 0 {
        profile_of(prog, m.action_profile_id)?;
    }
    for ((pid, mid), a) in &st.members {
        if (m.action_profile_id == 0 || *pid == m.action_profile_id)
            && (m.member_id == 0 || *mid == m.member_id)
        {
            out.push(p4::Entity {
                entity: Some(p4::entity::Entity::ActionProfileMember(
                    p4::ActionProfileMember {
                        action_profile_id: *pid,
                        member_id: *mid,
                        action: Some(action_to_p4(prog, a)),
                    },
                )),
            });
        }
    }
    Ok(())
}

/// Groups of one or all action selectors (`action_profile_id` 0), one or all (`group_id` 0).
pub(crate) fn read_groups(
    prog: &Program,
    st: &ProfileState,
    g: &p4::ActionProfileGroup,
    out: &mut Vec<p4::Entity>,
) -> Result<(), Status> {
    if g.action_profile_id != 0 {
        profile_of(prog, g.action_profile_id)?;
    }
    for ((pid, gid), grp) in &st.groups {
        if (g.action_profile_id == 0 || *pid == g.action_profile_id)
            && (g.group_id == 0 || *gid == g.group_id)
        {
            let members = grp
                .members
                .iter()
                .enumerate()
                .map(|(i, (m, w))| p4::action_profile_group::Member {
                    member_id: *m,
                    weight: *w as i32,
                    watch_kind: grp.watch.get(i).cloned().flatten(),
                })
                .collect();
            out.push(p4::Entity {
                entity: Some(p4::entity::Entity::ActionProfileGroup(
                    p4::ActionProfileGroup {
                        action_profile_id: *pid,
                        group_id: *gid,
                        members,
                        max_size: grp.max_size,
                    },
                )),
            });
        }
    }
    Ok(())
}

/// RECONCILE_AND_COMMIT: the members and groups of `old` for the program `new`: profiles must exist
/// in it with the same id and name, member actions (by name) with the same parameters.
pub(crate) fn reconcile(
    old: &Program,
    new: &Program,
    st: &ProfileState,
    map_action: impl Fn(&ActionCall, &Table) -> Result<ActionCall, Status>,
) -> Result<ProfileState, Status> {
    let find = |pid: u32| -> Result<(&ActionProfile, &Table), Status> {
        let op = profile_of(old, pid)?;
        let np = new
            .action_profiles
            .iter()
            .find(|p| {
                p.id == pid && p.name == op.name && p.selector.is_some() == op.selector.is_some()
            })
            .ok_or_else(|| {
                Status::failed_precondition(format!(
                    "action profile `{}` holds members or groups and is not in the new program",
                    op.name
                ))
            })?;
        Ok((np, profile_table(old, op)?))
    };
    let mut out = ProfileState {
        members: BTreeMap::new(),
        groups: st.groups.clone(),
        ports: st.ports.clone(),
    };
    for ((pid, mid), a) in &st.members {
        let (_, ot) = find(*pid)?;
        out.members.insert((*pid, *mid), map_action(a, ot)?);
    }
    for (pid, _) in st.groups.keys() {
        find(*pid)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use p4sec_engine::{Outputs, Worker};

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

    fn member(
        e: &Engine,
        st: &mut ProfileState,
        ty: Up,
        mid: u32,
        tag: Option<u8>,
    ) -> Result<(), Status> {
        let m = p4::ActionProfileMember {
            action_profile_id: e.prog.action_profiles[0].id,
            member_id: mid,
            action: tag.map(|t| set_sel(e, t)),
        };
        write_member(e, st, ty, &m)
    }

    fn group(
        e: &Engine,
        st: &mut ProfileState,
        ty: Up,
        gid: u32,
        members: &[(u32, i32)],
        max_size: i32,
    ) -> Result<(), Status> {
        let members = members
            .iter()
            .map(|(m, w)| p4::action_profile_group::Member {
                member_id: *m,
                weight: *w,
                watch_kind: None,
            })
            .collect();
        write_group(
            e,
            st,
            ty,
            &p4::ActionProfileGroup {
                action_profile_id: e.prog.action_profiles[0].id,
                group_id: gid,
                members,
                max_size,
            },
        )
    }

    /// Insert an entry of `sel_t` for destination 1 with this table action.
    fn sel_entry(e: &Engine, st: &ProfileState, ta: p4::table_action::Type) -> Result<(), Status> {
        let ti = e.table_index("I.sel_t").unwrap();
        let t = &e.prog.tables[ti];
        let (action, ind) = entry_action(&e.prog, t, st, &ta)?;
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
        e.table_update(ti, |t, d| {
            d.insert_with(
                t,
                p4sec_ir::TableEntry {
                    matches,
                    action,
                    priority: 0,
                },
                ind,
                None,
            )
        })
        .map_err(Status::internal)
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
    fn weighted_pick() {
        let a = |x: u32| ActionCall {
            action: x,
            args: vec![],
        };
        let ind = Indirect::new(ProfileRef::Group(1), vec![(a(1), 1), (a(2), 3)]);
        let picks: Vec<u32> = (0..8).map(|h| ind.pick(h).unwrap().action).collect();
        assert_eq!(picks, [1, 2, 2, 2, 1, 2, 2, 2]);
        assert!(Indirect::new(ProfileRef::Group(1), vec![])
            .pick(5)
            .is_none());
    }

    #[test]
    fn groups_select_per_flow_and_follow_member_changes() {
        let e = engine();
        let mut w = Worker::new(&e);
        let mut st = ProfileState::default();
        for m in 1..=3 {
            member(&e, &mut st, Up::Insert, m, Some(m as u8)).unwrap();
        }
        group(&e, &mut st, Up::Insert, 7, &[(1, 1), (2, 1), (3, 1)], 0).unwrap();
        sel_entry(&e, &st, p4::table_action::Type::ActionProfileGroupId(7)).unwrap();
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
        member(&e, &mut st, Up::Modify, 2, Some(20)).unwrap();
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
            member(&e, &mut st, Up::Delete, 1, None).unwrap_err().code(),
            tonic::Code::FailedPrecondition
        );
        assert_eq!(
            group(&e, &mut st, Up::Delete, 7, &[], 0)
                .unwrap_err()
                .code(),
            tonic::Code::FailedPrecondition
        );
        assert_eq!(
            member(&e, &mut st, Up::Modify, 9, Some(1))
                .unwrap_err()
                .code(),
            tonic::Code::NotFound
        );
        assert_eq!(
            member(&e, &mut st, Up::Insert, 1, Some(1))
                .unwrap_err()
                .code(),
            tonic::Code::AlreadyExists
        );
        assert_eq!(
            group(&e, &mut st, Up::Insert, 8, &[(4, 1)], 0)
                .unwrap_err()
                .code(),
            tonic::Code::NotFound
        );
        assert_eq!(
            group(&e, &mut st, Up::Insert, 8, &[(1, 0)], 0)
                .unwrap_err()
                .code(),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            group(&e, &mut st, Up::Modify, 7, &[(1, 1)], 3)
                .unwrap_err()
                .code(),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            group(&e, &mut st, Up::Insert, 8, &[(1, 40), (2, 40)], 0)
                .unwrap_err()
                .code(),
            tonic::Code::ResourceExhausted
        );
        // watch ports: a member whose port is down is left out of the choice, and back when it is
        // up
        st.ports.set(3, true);
        group(&e, &mut st, Up::Modify, 7, &[(1, 1), (2, 1), (3, 1)], 0).unwrap();
        let mut g = st.groups[&(e.prog.action_profiles[0].id, 7)].clone();
        g.watch[0] = Some(WatchKind::WatchPort(vec![3]));
        g.watch[2] = Some(WatchKind::Watch(4));
        st.groups.insert((e.prog.action_profiles[0].id, 7), g);
        watch_changed(&e, &st, 3).unwrap();
        let tags: Vec<u8> = (0..30)
            .map(|s| tag(&e, &mut w, 0x0200_0000_0000 + s))
            .collect();
        assert!(
            tags.iter().all(|t| [1, 20].contains(t)) && tags.contains(&1),
            "{tags:?}"
        );
        st.ports.set(3, false);
        watch_changed(&e, &st, 3).unwrap();
        assert!((0..30).all(|s| tag(&e, &mut w, 0x0200_0000_0000 + s) == 20));
        st.ports.set(4, true);
        watch_changed(&e, &st, 4).unwrap();
        let tags: Vec<u8> = (0..30)
            .map(|s| tag(&e, &mut w, 0x0200_0000_0000 + s))
            .collect();
        assert!(
            tags.contains(&3) && tags.contains(&20) && !tags.contains(&1),
            "{tags:?}"
        );
        assert_eq!(
            watch_port(&WatchKind::WatchPort(vec![1, 2, 3, 4, 5])).unwrap_err(),
            "watch_port has 5 bytes; ports have at most 4"
        );
        // an empty group misses (the default action leaves the tag at 0)
        group(&e, &mut st, Up::Modify, 7, &[], 0).unwrap();
        assert_eq!(tag(&e, &mut w, 0x0200_0000_0001), 0);
    }
}
