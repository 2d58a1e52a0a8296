//! The `TableAction` of an entry of a table implemented by an action profile or selector, in the
//! engine's terms ([`ProfileTarget`]: a member id, a group id or a one-shot action set) and back.

use crate::codec::{action_call, action_to_p4};
use crate::proto::p4::v1 as p4;
use p4sec_engine::tables::ProfileTarget;
use p4sec_ir::{ActionProfile, Implementation, Program, Table};
use tonic::Status;

/// The action profile implementing table `t`, if any.
pub(crate) fn profile_of_table<'a>(prog: &'a Program, t: &Table) -> Option<&'a ActionProfile> {
    match t.implementation {
        Implementation::ActionProfile(p) | Implementation::ActionSelector(p) => {
            prog.action_profiles.get(p as usize)
        }
        Implementation::None => None,
    }
}

fn no_watch(watch: bool, what: &str) -> Result<(), Status> {
    if watch {
        return Err(Status::unimplemented(format!("{what}: watch ports of one-shot action sets are not supported (those of group members are)")));
    }
    Ok(())
}

/// What an entry of table `t`, which has an action profile, refers to, from its `TableAction`.
pub(crate) fn profile_target(
    prog: &Program,
    t: &Table,
    ta: &p4::table_action::Type,
) -> Result<ProfileTarget, Status> {
    use p4::table_action::Type as A;
    let Some(ap) = profile_of_table(prog, t) else {
        return Err(Status::invalid_argument(format!(
            "table `{}` has no action profile: its entries take an action, not a member, group or action set",
            t.name
        )));
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
        A::ActionProfileMemberId(mid) => Ok(ProfileTarget::Member(*mid)),
        A::ActionProfileGroupId(_) | A::ActionProfileActionSet(_) if !selector => {
            Err(Status::invalid_argument(format!(
                "table `{}`: `{}` is an action profile without a selector: entries name members",
                t.name, ap.name
            )))
        }
        A::ActionProfileGroupId(gid) => Ok(ProfileTarget::Group(*gid)),
        A::ActionProfileActionSet(set) => {
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
            // (an empty set, or one mixed with members and groups, is refused by the engine)
            Ok(ProfileTarget::ActionSet(choices))
        }
    }
}

/// The P4Runtime `TableAction` of an entry referring to `target` (read back as it was written).
pub(crate) fn table_action_of(prog: &Program, target: &ProfileTarget) -> p4::TableAction {
    use p4::table_action::Type as A;
    let ty = match target {
        ProfileTarget::Member(m) => A::ActionProfileMemberId(*m),
        ProfileTarget::Group(g) => A::ActionProfileGroupId(*g),
        ProfileTarget::ActionSet(choices) => {
            A::ActionProfileActionSet(p4::ActionProfileActionSet {
                action_profile_actions: choices
                    .iter()
                    .map(|(a, w)| p4::ActionProfileAction {
                        action: Some(action_to_p4(prog, a)),
                        weight: *w as i32,
                        watch_kind: None,
                    })
                    .collect(),
            })
        }
    };
    p4::TableAction { r#type: Some(ty) }
}
