//! Action profile state: the members (an action each) and groups (weighted members) of every action
//! profile and selector of the program, and what an entry's [`ProfileTarget`] resolves to: the
//! action a hit runs and, for groups and action sets, the weighted actions a packet chooses from.
//! The engine's changes of members and groups, which rewrite the entries using them, are in
//! `control/profile_writes.rs`.

use super::api::{Group, PortStatus, ProfileTarget, TableError};
use super::entry::{Indirect, ProfileRef};
use super::validate::validate_action;
use p4sec_ir::{ActionCall, ActionProfile, Implementation, Program, Table};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Members and groups keyed by (action profile id, member or group id), and the port states
/// watch ports follow.
#[derive(Debug, Default)]
pub(crate) struct ProfileStore {
    pub members: BTreeMap<(u32, u32), ActionCall>,
    pub groups: BTreeMap<(u32, u32), Group>,
    pub ports: Arc<PortStatus>,
}

pub(crate) fn in_profile<V>(
    m: &BTreeMap<(u32, u32), V>,
    pid: u32,
) -> impl Iterator<Item = (&(u32, u32), &V)> {
    m.range((pid, 0)..=(pid, u32::MAX))
}

impl ProfileStore {
    /// No member and no group in profile `pid`.
    pub fn is_empty_for(&self, pid: u32) -> bool {
        in_profile(&self.members, pid).next().is_none()
            && in_profile(&self.groups, pid).next().is_none()
    }
    /// The groups of profile `pid` holding member `mid`.
    pub fn groups_with(&self, pid: u32, mid: u32) -> Vec<u32> {
        in_profile(&self.groups, pid)
            .filter(|(_, g)| g.members.iter().any(|m| m.member == mid))
            .map(|((_, g), _)| *g)
            .collect()
    }
}

/// The action profile implementing table `t`, if any.
pub(crate) fn profile_of_table<'a>(prog: &'a Program, t: &Table) -> Option<&'a ActionProfile> {
    match t.implementation {
        Implementation::ActionProfile(p) | Implementation::ActionSelector(p) => {
            prog.action_profiles.get(p as usize)
        }
        Implementation::None => None,
    }
}

/// The table whose actions the profile's members take (tables sharing a profile have the same
/// actions).
pub fn profile_table<'a>(prog: &'a Program, ap: &ActionProfile) -> Result<&'a Table, TableError> {
    ap.tables
        .first()
        .and_then(|t| prog.tables.get(*t as usize))
        .ok_or_else(|| {
            TableError::precondition(format!("action profile `{}` implements no table", ap.name))
        })
}

/// An entry's target checked against its table's implementation: entries of tables without an
/// action profile run their own action; with a profile, a member; with a selector, also a group
/// or an action set.
pub(crate) fn check_target(
    prog: &Program,
    t: &Table,
    target: Option<&ProfileTarget>,
) -> Result<(), TableError> {
    let Some(ap) = profile_of_table(prog, t) else {
        return match target {
            None => Ok(()),
            Some(_) => Err(TableError::invalid(format!(
                "table `{}` has no action profile: its entries take an action, not a member, group or action set",
                t.name
            ))),
        };
    };
    let selector = matches!(t.implementation, Implementation::ActionSelector(_));
    match target {
        None => Err(TableError::invalid(format!(
            "table `{}` is implemented by `{}`: its entries name an action profile member{}",
            t.name,
            ap.name,
            if selector {
                ", group or action set"
            } else {
                ""
            }
        ))),
        Some(ProfileTarget::Member(_)) => Ok(()),
        Some(_) if !selector => Err(TableError::invalid(format!(
            "table `{}`: `{}` is an action profile without a selector: entries name members",
            t.name, ap.name
        ))),
        Some(_) => Ok(()),
    }
}

/// What an entry of table `t` (implemented by profile `ap`) referring to `target` runs: the action
/// a hit runs and what it refers to. An empty group keeps the table's default action (and misses).
pub(crate) fn resolve(
    t: &Table,
    st: &ProfileStore,
    ap: &ActionProfile,
    target: &ProfileTarget,
) -> Result<(ActionCall, Arc<Indirect>), TableError> {
    let pid = ap.id;
    match target {
        ProfileTarget::Member(mid) => {
            let a = st.members.get(&(pid, *mid)).ok_or_else(|| {
                TableError::not_found(format!(
                    "table `{}`: no action profile member {mid}",
                    t.name
                ))
            })?;
            Ok((
                a.clone(),
                Arc::new(Indirect::new(ProfileRef::Member(*mid), vec![])),
            ))
        }
        ProfileTarget::Group(gid) => {
            let g = st.groups.get(&(pid, *gid)).ok_or_else(|| {
                TableError::not_found(format!("table `{}`: no action profile group {gid}", t.name))
            })?;
            let mut choices = vec![];
            for (i, m) in g.members.iter().enumerate() {
                let a = st.members.get(&(pid, m.member)).ok_or_else(|| {
                    TableError::internal(format!(
                        "group {gid} holds member {}, which does not exist",
                        m.member
                    ))
                })?;
                // a member whose watch port is down is left out until the port is up again
                if g.watch_port(i).is_some_and(|p| !st.ports.is_up(p)) {
                    continue;
                }
                choices.push((a.clone(), m.weight as u32));
            }
            let action = choices
                .first()
                .map(|(a, _)| a.clone())
                .unwrap_or_else(|| t.default_action.clone());
            Ok((
                action,
                Arc::new(Indirect::new(ProfileRef::Group(*gid), choices)),
            ))
        }
        ProfileTarget::ActionSet(set) => {
            if !st.is_empty_for(pid) {
                return Err(TableError::invalid(format!(
                    "table `{}`: `{}` is programmed with members and groups; one-shot action sets cannot be mixed with them",
                    t.name, ap.name
                )));
            }
            let Some((first, _)) = set.first() else {
                return Err(TableError::invalid(format!(
                    "table `{}`: the action set is empty",
                    t.name
                )));
            };
            if let Some((_, w)) = set.iter().find(|(_, w)| *w == 0) {
                return Err(TableError::invalid(format!(
                    "table `{}`: action set weights must be positive (got {w})",
                    t.name
                )));
            }
            Ok((
                first.clone(),
                Arc::new(Indirect::new(ProfileRef::ActionSet, set.clone())),
            ))
        }
    }
}

/// The target an installed entry was written with.
pub(crate) fn target_of(ind: &Indirect) -> ProfileTarget {
    match ind.reference {
        ProfileRef::Member(m) => ProfileTarget::Member(m),
        ProfileRef::Group(g) => ProfileTarget::Group(g),
        ProfileRef::ActionSet => ProfileTarget::ActionSet(ind.choices.clone()),
    }
}

/// A group as inserted or modified (`old`: the group it replaces), checked against the profile and
/// its members: positive weights given once per member, valid watch ports, existing members, a
/// sum of weights within `max_size` (or the selector's size), and room for a new group.
pub(crate) fn check_group(
    st: &ProfileStore,
    ap: &ActionProfile,
    gid: u32,
    g: &Group,
    old: Option<&Group>,
) -> Result<(), TableError> {
    let pid = ap.id;
    if let Some(o) = old {
        if o.max_size != g.max_size {
            return Err(TableError::invalid(format!(
                "`{}`: group {gid} was inserted with max_size {}; it cannot change",
                ap.name, o.max_size
            )));
        }
    }
    if g.max_size < 0 {
        return Err(TableError::invalid(format!(
            "`{}`: max_size cannot be negative",
            ap.name
        )));
    }
    if g.max_size as u64 > ap.size as u64 {
        return Err(TableError::full(format!(
            "`{}`: groups hold at most {} (sum of weights), max_size {} is too large",
            ap.name, ap.size, g.max_size
        )));
    }
    for (i, m) in g.members.iter().enumerate() {
        if g.members[..i].iter().any(|x| x.member == m.member) {
            return Err(TableError::invalid(format!(
                "`{}`: member {} is given twice in group {gid} (use its weight)",
                ap.name, m.member
            )));
        }
        if m.weight <= 0 {
            return Err(TableError::invalid(format!(
                "`{}`: member {} of group {gid} has weight {}; weights must be positive",
                ap.name, m.member, m.weight
            )));
        }
        if let Some(w) = &m.watch {
            w.port().map_err(|e| {
                TableError::invalid(format!(
                    "`{}`: member {} of group {gid}: {e}",
                    ap.name, m.member
                ))
            })?;
        }
        if !st.members.contains_key(&(pid, m.member)) {
            return Err(TableError::not_found(format!(
                "`{}`: group {gid} names member {}, which does not exist",
                ap.name, m.member
            )));
        }
    }
    let limit = if g.max_size > 0 {
        g.max_size as u64
    } else {
        ap.size as u64
    };
    let sum: u64 = g.members.iter().map(|m| m.weight as u64).sum();
    if sum > limit {
        return Err(TableError::full(format!(
            "`{}`: group {gid} would hold {sum} (sum of weights), at most {limit}",
            ap.name
        )));
    }
    if old.is_none() && in_profile(&st.groups, pid).count() >= ap.size as usize {
        return Err(TableError::full(format!(
            "`{}` holds at most {} groups",
            ap.name, ap.size
        )));
    }
    Ok(())
}

/// A member's action checked against the profile's table.
pub(crate) fn check_member_action(
    prog: &Program,
    ap: &ActionProfile,
    a: &ActionCall,
) -> Result<(), TableError> {
    validate_action(prog, profile_table(prog, ap)?, a, false).map_err(TableError::invalid)
}
