//! Idle-timeout notifications on the P4Runtime device: the entries the engine reports idle, sent to
//! the primary controller once per idle period.

use crate::codec::from_entry;
use crate::device::Device;
use crate::proto::p4::v1 as p4;

impl Device {
    /// Tell the primary controller about entries that were not hit for their idle timeout
    /// (IdleTimeoutNotification), once per idle period: an entry is reported again only after a new
    /// hit and another idle timeout. Without a primary controller nothing is reported (nor marked
    /// as reported).
    pub fn check_idle(&self) {
        let Some(pl) = self
            .pipeline
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        else {
            return;
        };
        let prog = &pl.engine.prog;
        if !prog.tables.iter().any(|t| t.support_timeout) {
            return;
        }
        let tx = {
            let a = self.arb.lock().unwrap_or_else(|p| p.into_inner());
            let primary = a.primary();
            a.controllers
                .values()
                .find(|c| Some(c.election_id) == primary)
                .map(|c| c.tx.clone())
        };
        let Some(tx) = tx else { return };
        let now = p4sec_engine::coarse_ms();
        let mut entries = vec![];
        let mut told = vec![];
        for (ti, t) in prog
            .tables
            .iter()
            .enumerate()
            .filter(|(_, t)| t.support_timeout)
        {
            let Ok(idle) = pl.engine.table_idle_entries(ti, now) else {
                continue;
            };
            for x in idle {
                let mut pe = from_entry(prog, t, &x.entry, 0, 0);
                pe.action = None;
                pe.counter_data = None;
                pe.idle_timeout_ns = x.idle_timeout_ns as i64;
                entries.push(pe);
                told.push((ti, x.entry, x.last_hit_ms));
            }
        }
        if entries.is_empty() {
            return;
        }
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0);
        let msg = p4::StreamMessageResponse {
            update: Some(
                p4::stream_message_response::Update::IdleTimeoutNotification(
                    p4::IdleTimeoutNotification {
                        table_entry: entries,
                        timestamp,
                    },
                ),
            ),
        };
        if tx.try_send(Ok(msg)).is_ok() {
            for (ti, e, last) in told {
                pl.engine.table_idle_told(ti, &e, last);
            }
        }
    }
}
