//! Batches of table changes in the engine's terms ([`TableOp`]): per table as one new version
//! each ([`Engine::tables_apply`]), or all tables together, all or nothing
//! ([`Engine::tables_apply_atomic`]). Entries of tables with an action profile are resolved against
//! its members and groups while the batch is applied.

use crate::tables::profiles::{check_target, profile_of_table, resolve, ProfileStore};
use crate::tables::{validate_action, validate_entry, EntryWrite, TableData, TableError, TableOp};
use crate::Engine;
use p4sec_ir::{Program, Table, TableEntry};
use std::collections::BTreeMap;

impl Engine {
    /// Apply `ops`, each succeeding or failing on its own: the changes of one table become one new
    /// version of it (so a batch costs one copy per table, not one per change), published table by
    /// table. Returns one result per op, in order.
    pub fn tables_apply(&self, ops: Vec<TableOp>) -> Vec<Result<(), TableError>> {
        let mut results: Vec<Result<(), TableError>> = (0..ops.len())
            .map(|_| Err(TableError::internal("change not applied")))
            .collect();
        let mut per_table: BTreeMap<usize, Vec<(usize, TableOp)>> = BTreeMap::new();
        for (i, op) in ops.into_iter().enumerate() {
            per_table.entry(op.table()).or_default().push((i, op));
        }
        // members and groups cannot change while the entries referring to them are resolved
        let st = self
            .match_action
            .profiles
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for (ti, ops) in per_table {
            if let Err(m) = self.table(ti) {
                for (i, _) in ops {
                    results[i] = Err(TableError::not_found(m.clone()));
                }
                continue;
            }
            let _ = self.table_update(ti, |t, d| {
                for (i, op) in ops {
                    results[i] = apply_op(&self.prog, t, d, &st, op);
                }
                Ok(())
            });
        }
        results
    }

    /// Apply `ops` all or nothing: every table changed is copied, the changes are applied to the
    /// copies in order and, if all succeed, the new versions are published together (a packet sees
    /// all of them or none). Otherwise nothing changes and the error names the op that failed (its
    /// index in `ops`).
    pub fn tables_apply_atomic(&self, ops: Vec<TableOp>) -> Result<(), (usize, TableError)> {
        if let Some(i) = ops.iter().position(|op| self.table(op.table()).is_err()) {
            let m = self.table(ops[i].table()).err().unwrap_or_default();
            return Err((i, TableError::not_found(m)));
        }
        let st = self
            .match_action
            .profiles
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let tables: Vec<usize> = ops.iter().map(TableOp::table).collect();
        let mut ops = ops.into_iter().enumerate();
        let mut failed = None;
        let r = self.tables_update_atomic(&tables, |_, t, d| {
            let Some((i, op)) = ops.next() else {
                return Err("no such change".into());
            };
            apply_op(&self.prog, t, d, &st, op).map_err(|e| {
                failed = Some((i, e.clone()));
                e.message
            })
        });
        match (r, failed) {
            (Ok(()), _) => Ok(()),
            (Err(_), Some(f)) => Err(f),
            (Err(m), None) => Err((0, TableError::internal(m))),
        }
    }

    /// Insert entries into table `ti` as one new version, all or nothing.
    pub fn table_insert_batch(&self, ti: usize, entries: Vec<TableEntry>) -> Result<(), String> {
        let ops = entries
            .into_iter()
            .map(|e| TableOp::Insert(ti, EntryWrite::new(e)))
            .collect();
        self.tables_apply_atomic(ops).map_err(|(_, e)| e.message)
    }
}

fn const_entries(t: &Table) -> Result<(), TableError> {
    if t.entries_are_const {
        return Err(TableError::precondition(format!(
            "table `{}` has const entries",
            t.name
        )));
    }
    Ok(())
}

/// Apply one change to a table version `d` of table `t`.
fn apply_op(
    prog: &Program,
    t: &Table,
    d: &mut TableData,
    st: &ProfileStore,
    op: TableOp,
) -> Result<(), TableError> {
    let (w, insert) = match op {
        TableOp::Insert(_, w) => (w, true),
        TableOp::Modify(_, w) => (w, false),
        TableOp::Delete(_, e) => {
            const_entries(t)?;
            return d.delete(t, &e).map(|_| ());
        }
        TableOp::SetDefault(_, a) => {
            if t.default_is_const && a != t.default_action {
                return Err(TableError::precondition(format!(
                    "table `{}` has a const default action",
                    t.name
                )));
            }
            validate_action(prog, t, &a, true).map_err(TableError::invalid)?;
            d.default = a;
            return Ok(());
        }
    };
    const_entries(t)?;
    check_target(prog, t, w.target.as_ref())?;
    let (entry, ind) = match (&w.target, profile_of_table(prog, t)) {
        (Some(target), Some(ap)) => {
            let (action, ind) = resolve(t, st, ap, target)?;
            (TableEntry { action, ..w.entry }, Some(ind))
        }
        _ => {
            validate_entry(prog, t, &w.entry).map_err(TableError::invalid)?;
            (w.entry, None)
        }
    };
    let idle = w.idle_timeout_ns.map(|ns| (ns, entry.clone()));
    if insert {
        d.insert_with(t, entry, ind, w.meter.flatten())?;
    } else {
        d.modify_with(t, entry, ind, w.meter)?;
    }
    match idle {
        Some((ns, e)) => d.set_idle_timeout(t, &e, ns),
        None => Ok(()),
    }
}
