//! Primary arbitration among the controllers of a device: the arbitration responses every
//! connected controller gets, controllers whose certificates were revoked taken out, and the log of
//! primary changes.

use crate::authz::Revoked;
use crate::codec::to_uint128;
use crate::device::{Arbitration, Device};
use crate::proto::google::rpc;
use crate::proto::p4::v1 as p4;
use tokio::sync::mpsc;
use tonic::{Code, Status};

/// Log a change of primary controller (from `before` to `after`, as (election id, address)).
pub(crate) fn log_primary_change(
    device_id: u64,
    before: &Option<(u128, String)>,
    after: &Option<(u128, String)>,
) {
    if before == after {
        return;
    }
    if let Some((id, peer)) = before {
        rtlog!(
            crate::log::Level::Info,
            "P4Runtime: device {device_id}: {peer} (election id {id}) lost primary"
        );
    }
    match after {
        Some((id, peer)) => rtlog!(crate::log::Level::Info, "P4Runtime: device {device_id}: {peer} (election id {id}) is now the primary controller"),
        None => rtlog!(crate::log::Level::Info, "P4Runtime: device {device_id}: no primary controller"),
    }
}

pub(crate) type Notify = Vec<(
    mpsc::Sender<Result<p4::StreamMessageResponse, Status>>,
    p4::StreamMessageResponse,
)>;

/// Arbitration responses for every connected controller: OK for the primary, ALREADY_EXISTS for
/// backups.
pub(crate) fn arbitration_messages(a: &Arbitration, device_id: u64) -> Notify {
    let primary = a.primary();
    a.controllers
        .values()
        .map(|c| {
            let is_primary = Some(c.election_id) == primary;
            let status = rpc::Status {
                code: if is_primary {
                    Code::Ok as i32
                } else {
                    Code::AlreadyExists as i32
                },
                message: if is_primary {
                    "primary".into()
                } else {
                    "backup".into()
                },
                details: vec![],
            };
            let m = p4::StreamMessageResponse {
                update: Some(p4::stream_message_response::Update::Arbitration(
                    p4::MasterArbitrationUpdate {
                        device_id,
                        role: None,
                        election_id: primary.map(to_uint128),
                        status: Some(status),
                    },
                )),
            };
            (c.tx.clone(), m)
        })
        .collect()
}

/// Take the controllers whose certificates are revoked (all of them while the list is unusable)
/// out of the arbitration: each gets UNAUTHENTICATED on its stream (which ends it), the others the
/// new arbitration state. The messages to send.
pub(crate) fn drop_revoked(
    device: &Device,
    revoked: &Revoked,
) -> Vec<(
    mpsc::Sender<Result<p4::StreamMessageResponse, Status>>,
    Result<p4::StreamMessageResponse, Status>,
)> {
    let mut a = device.arb.lock().unwrap_or_else(|p| p.into_inner());
    let gone: Vec<(u64, String)> = a
        .controllers
        .iter()
        .filter_map(|(k, c)| {
            let id = c.identity.as_ref()?;
            revoked.check(&id.serial).err().map(|(_, why)| (*k, why))
        })
        .collect();
    if gone.is_empty() {
        return vec![];
    }
    let before = a.primary_info();
    let mut out = vec![];
    for (k, why) in gone {
        if let Some(c) = a.controllers.remove(&k) {
            rtlog!(
                crate::log::Level::Info,
                "P4Runtime: {} (election id {}): out of the arbitration: {why}",
                c.peer,
                c.election_id
            );
            out.push((c.tx, Err(Status::unauthenticated(why))));
        }
    }
    if before != a.primary_info() {
        device.digest_cache_clear();
    }
    log_primary_change(device.device_id, &before, &a.primary_info());
    out.extend(
        arbitration_messages(&a, device.device_id)
            .into_iter()
            .map(|(t, m)| (t, Ok(m))),
    );
    out
}
