//! Action profile members and groups changed through the engine: each change is checked against the
//! profile and the entries using it, and the entries referring to a changed member or group are
//! rewritten (one new version per table). Also the read-back, the state carried into a new
//! pipeline, and the watch ports' effect on groups.

use crate::tables::profiles::{
    check_group, check_member_action, in_profile, resolve, target_of, ProfileStore,
};
use crate::tables::{Group, PortStatus, ProfileTarget, TableError};
use crate::Engine;
use p4sec_ir::{ActionCall, ActionProfile};
use std::sync::{Arc, MutexGuard};

impl Engine {
    fn profiles(&self) -> MutexGuard<'_, ProfileStore> {
        self.match_action
            .profiles
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn profile(&self, pi: usize) -> Result<&ActionProfile, TableError> {
        self.prog
            .action_profiles
            .get(pi)
            .ok_or_else(|| TableError::not_found(format!("no action profile with index {pi}")))
    }

    fn profile_index(&self, id: u32) -> usize {
        self.prog
            .action_profiles
            .iter()
            .position(|p| p.id == id)
            .unwrap_or(usize::MAX)
    }

    /// The action of member `mid` of action profile `pi`.
    pub fn profile_member(&self, pi: usize, mid: u32) -> Option<ActionCall> {
        let id = self.prog.action_profiles.get(pi)?.id;
        self.profiles().members.get(&(id, mid)).cloned()
    }

    /// Group `gid` of action selector `pi`.
    pub fn profile_group(&self, pi: usize, gid: u32) -> Option<Group> {
        let id = self.prog.action_profiles.get(pi)?.id;
        self.profiles().groups.get(&(id, gid)).cloned()
    }

    /// Every member: (profile index, member id, action), by profile id, then member id.
    pub fn profile_members(&self) -> Vec<(usize, u32, ActionCall)> {
        self.profiles()
            .members
            .iter()
            .map(|((p, m), a)| (self.profile_index(*p), *m, a.clone()))
            .collect()
    }

    /// Every group: (profile index, group id, group), by profile id, then group id.
    pub fn profile_groups(&self) -> Vec<(usize, u32, Group)> {
        self.profiles()
            .groups
            .iter()
            .map(|((p, g), x)| (self.profile_index(*p), *g, x.clone()))
            .collect()
    }

    pub fn profile_member_insert(
        &self,
        pi: usize,
        mid: u32,
        a: ActionCall,
    ) -> Result<(), TableError> {
        let ap = self.profile(pi)?;
        let mut st = self.profiles();
        let pid = ap.id;
        if st.members.contains_key(&(pid, mid)) {
            return Err(TableError::exists(format!(
                "`{}`: member {mid} exists",
                ap.name
            )));
        }
        check_member_action(&self.prog, ap, &a)?;
        if in_profile(&st.members, pid).count() >= ap.size as usize {
            return Err(TableError::full(format!(
                "`{}` holds at most {} members",
                ap.name, ap.size
            )));
        }
        if st.is_empty_for(pid) {
            if let Some(t) = self.entry_using(ap, |r| matches!(r, ProfileTarget::ActionSet(_))) {
                return Err(TableError::invalid(format!(
                    "`{}`: table `{t}` is programmed with one-shot action sets; members and groups cannot be mixed with them",
                    ap.name
                )));
            }
        }
        st.members.insert((pid, mid), a);
        Ok(())
    }

    /// Give member `mid` another action; the entries using it, directly or through a group, run it
    /// from the next packet on.
    pub fn profile_member_modify(
        &self,
        pi: usize,
        mid: u32,
        a: ActionCall,
    ) -> Result<(), TableError> {
        let ap = self.profile(pi)?;
        let mut st = self.profiles();
        let pid = ap.id;
        if !st.members.contains_key(&(pid, mid)) {
            return Err(TableError::not_found(format!(
                "`{}`: no member {mid}",
                ap.name
            )));
        }
        check_member_action(&self.prog, ap, &a)?;
        st.members.insert((pid, mid), a);
        let groups = st.groups_with(pid, mid);
        self.refresh(&st, ap, |r| {
            *r == ProfileTarget::Member(mid)
                || matches!(r, ProfileTarget::Group(g) if groups.contains(g))
        })
    }

    /// Delete member `mid`, which no group and no entry may use.
    pub fn profile_member_delete(&self, pi: usize, mid: u32) -> Result<(), TableError> {
        let ap = self.profile(pi)?;
        let mut st = self.profiles();
        let pid = ap.id;
        if !st.members.contains_key(&(pid, mid)) {
            return Err(TableError::not_found(format!(
                "`{}`: no member {mid}",
                ap.name
            )));
        }
        if let Some(gid) = st.groups_with(pid, mid).first() {
            return Err(TableError::precondition(format!(
                "`{}`: member {mid} is in group {gid}",
                ap.name
            )));
        }
        if let Some(t) = self.entry_using(ap, |r| *r == ProfileTarget::Member(mid)) {
            return Err(TableError::precondition(format!(
                "`{}`: member {mid} is used by an entry of table `{t}`",
                ap.name
            )));
        }
        st.members.remove(&(pid, mid));
        Ok(())
    }

    fn selector(&self, pi: usize) -> Result<&ActionProfile, TableError> {
        let ap = self.profile(pi)?;
        if ap.selector.is_none() {
            return Err(TableError::invalid(format!(
                "`{}` is an action profile without a selector: it has no groups",
                ap.name
            )));
        }
        Ok(ap)
    }

    pub fn profile_group_insert(&self, pi: usize, gid: u32, g: Group) -> Result<(), TableError> {
        let ap = self.selector(pi)?;
        let mut st = self.profiles();
        if st.groups.contains_key(&(ap.id, gid)) {
            return Err(TableError::exists(format!(
                "`{}`: group {gid} exists",
                ap.name
            )));
        }
        check_group(&st, ap, gid, &g, None)?;
        st.groups.insert((ap.id, gid), g);
        Ok(())
    }

    /// Replace the members of group `gid` (its `max_size` stays); the entries using it choose
    /// among the new members from the next packet on.
    pub fn profile_group_modify(&self, pi: usize, gid: u32, g: Group) -> Result<(), TableError> {
        let ap = self.selector(pi)?;
        let mut st = self.profiles();
        let Some(old) = st.groups.get(&(ap.id, gid)) else {
            return Err(TableError::not_found(format!(
                "`{}`: no group {gid}",
                ap.name
            )));
        };
        check_group(&st, ap, gid, &g, Some(old))?;
        st.groups.insert((ap.id, gid), g);
        self.refresh(&st, ap, |r| *r == ProfileTarget::Group(gid))
    }

    /// Delete group `gid`, which no entry may use.
    pub fn profile_group_delete(&self, pi: usize, gid: u32) -> Result<(), TableError> {
        let ap = self.selector(pi)?;
        let mut st = self.profiles();
        if !st.groups.contains_key(&(ap.id, gid)) {
            return Err(TableError::not_found(format!(
                "`{}`: no group {gid}",
                ap.name
            )));
        }
        if let Some(t) = self.entry_using(ap, |r| *r == ProfileTarget::Group(gid)) {
            return Err(TableError::precondition(format!(
                "`{}`: group {gid} is used by an entry of table `{t}`",
                ap.name
            )));
        }
        st.groups.remove(&(ap.id, gid));
        Ok(())
    }

    /// Replace every member and group (a new pipeline taking over an old one's; the caller checked
    /// them against this program). Entries are installed afterwards.
    pub fn profiles_restore(
        &self,
        members: Vec<(usize, u32, ActionCall)>,
        groups: Vec<(usize, u32, Group)>,
    ) -> Result<(), TableError> {
        let mut st = self.profiles();
        st.members.clear();
        st.groups.clear();
        for (pi, mid, a) in members {
            st.members.insert((self.profile(pi)?.id, mid), a);
        }
        for (pi, gid, g) in groups {
            st.groups.insert((self.profile(pi)?.id, gid), g);
        }
        Ok(())
    }

    /// Follow these port states for the watch ports of group members (the device's, shared by
    /// every pipeline it installs).
    pub fn profile_ports(&self, ports: Arc<PortStatus>) {
        self.profiles().ports = ports;
    }

    /// A port went up or down (the caller updated the port states): the entries using groups with
    /// members watching it choose again among the members whose watch ports are up.
    pub fn profile_port_changed(&self, port: u32) -> Result<(), TableError> {
        let st = self.profiles();
        for ap in self
            .prog
            .action_profiles
            .iter()
            .filter(|a| a.selector.is_some())
        {
            let gids: Vec<u32> = in_profile(&st.groups, ap.id)
                .filter(|(_, g)| (0..g.members.len()).any(|i| g.watch_port(i) == Some(port)))
                .map(|((_, gid), _)| *gid)
                .collect();
            if !gids.is_empty() {
                self.refresh(
                    &st,
                    ap,
                    |r| matches!(r, ProfileTarget::Group(g) if gids.contains(g)),
                )?;
            }
        }
        Ok(())
    }

    /// A table of the profile with an entry referring to something `pred` accepts, by name.
    fn entry_using(
        &self,
        ap: &ActionProfile,
        pred: impl Fn(&ProfileTarget) -> bool,
    ) -> Option<String> {
        for &ti in &ap.tables {
            let Ok(snap) = self.table_snapshot(ti as usize) else {
                continue;
            };
            if snap
                .entries
                .iter()
                .any(|x| x.indirect.as_deref().is_some_and(|i| pred(&target_of(i))))
            {
                return Some(self.prog.tables[ti as usize].name.clone());
            }
        }
        None
    }

    /// Rewrite the entries of the profile's tables that refer to a changed member or group.
    fn refresh(
        &self,
        st: &ProfileStore,
        ap: &ActionProfile,
        affected: impl Fn(&ProfileTarget) -> bool,
    ) -> Result<(), TableError> {
        for &ti in &ap.tables {
            let ti = ti as usize;
            let snap = self.table_snapshot(ti).map_err(TableError::internal)?;
            let uses = |x: &crate::tables::Installed| {
                x.indirect.as_deref().map(target_of).filter(|r| affected(r))
            };
            if !snap.entries.iter().any(|x| uses(x).is_some()) {
                continue;
            }
            let mut err = None;
            let _ = self.table_update(ti, |t, d| {
                for i in 0..d.entries.len() {
                    let Some(r) = uses(&d.entries[i]) else {
                        continue;
                    };
                    match resolve(t, st, ap, &r) {
                        Ok((a, ind)) => d.set_indirect(t, i, a, Some(ind)),
                        Err(e) => err = Some(e),
                    }
                }
                Ok(())
            });
            if let Some(e) = err {
                return Err(e);
            }
        }
        Ok(())
    }
}
