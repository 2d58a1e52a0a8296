//! Table entry updates of a Write request in the engine's terms: each P4Runtime `TableEntry`
//! checked and translated into a [`TableOp`] (its match, its action or what it refers to in the
//! table's action profile, direct meter and idle timeout), and the atomic modes
//! (ROLLBACK_ON_ERROR, DATAPLANE_ATOMIC), whose updates the engine applies all or nothing.

use crate::codec::{default_action, meter_rates, table_of, to_entry, to_match};
use crate::proto::p4::v1 as p4;
use crate::status::status;
use p4sec_engine::tables::{EntryWrite, TableOp};
use p4sec_engine::Engine;
use p4sec_ir::{Program, Table};
use tonic::Status;

/// A table entry update of table `ti` (`t`), checked against the table, as an engine change.
pub(crate) fn prepare_entry(
    prog: &Program,
    ti: usize,
    t: &Table,
    te: &p4::TableEntry,
    ty: p4::update::Type,
) -> Result<TableOp, Status> {
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
        return Ok(TableOp::Delete(ti, entry));
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
    let idle_timeout_ns = t.support_timeout.then_some(te.idle_timeout_ns as u64);
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
    // INSERT: the initial configuration; MODIFY: `Some` (re)configures the direct meter (the
    // specification resets it to the default when `meter_config` is unset), `None` keeps it
    let meter = match ty {
        T::Insert => Some(rates),
        _ if t.direct_meter.is_some() => Some(rates),
        _ => None,
    };
    let w = if indirect_table {
        let ta = ta.ok_or_else(|| Status::invalid_argument("the table entry has no action"))?;
        EntryWrite {
            target: Some(crate::table_action::profile_target(prog, t, ta)?),
            entry: to_match(prog, t, te)?,
            meter,
            idle_timeout_ns,
        }
    } else {
        EntryWrite {
            entry: to_entry(prog, t, te)?,
            target: None,
            meter,
            idle_timeout_ns,
        }
    };
    Ok(match ty {
        T::Insert => TableOp::Insert(ti, w),
        _ => TableOp::Modify(ti, w),
    })
}

/// One update of an atomic write as an engine change: table entries and default actions only.
fn atomic_op(prog: &Program, u: &p4::Update) -> Result<TableOp, Status> {
    let ty = p4::update::Type::try_from(u.r#type).unwrap_or(p4::update::Type::Unspecified);
    let Some(p4::entity::Entity::TableEntry(te)) =
        u.entity.as_ref().and_then(|e| e.entity.as_ref())
    else {
        return Err(Status::unimplemented(
            "atomic writes (ROLLBACK_ON_ERROR, DATAPLANE_ATOMIC) support table entries only",
        ));
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
        return Ok(TableOp::SetDefault(ti, a));
    }
    if t.entries_are_const {
        return Err(Status::failed_precondition(format!(
            "table `{}` has const entries",
            t.name
        )));
    }
    prepare_entry(prog, ti, t, te, ty)
}

/// ROLLBACK_ON_ERROR and DATAPLANE_ATOMIC writes of table entries: the engine applies all updates
/// to copies of the tables and publishes them together (packets see all of them or none), or, if
/// one fails, none; the failing update reports its error and the others ABORTED. Other entities
/// are not supported in these modes.
pub(crate) fn write_atomic(engine: &Engine, updates: &[p4::Update]) -> Vec<Result<(), Status>> {
    let mut ops = vec![];
    let mut results: Vec<Result<(), Status>> = vec![];
    for u in updates {
        match atomic_op(&engine.prog, u) {
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
    // every update is an op here: op k is update k
    if let Err((k, e)) = engine.tables_apply_atomic(ops) {
        results[k] = Err(status(e));
        aborted(&mut results);
    }
    results
}
