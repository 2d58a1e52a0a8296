//! One controller's StreamChannel, message by message: arbitration requests (the device checked,
//! election ids unique, every controller told the outcome), packet-out from the primary, digest
//! acknowledgements from the primary, and a new arbitration when the stream ends.

use crate::arbitration::{arbitration_messages, log_primary_change};
use crate::authz::Revoked;
use crate::callers::Caller;
use crate::codec::eid;
use crate::device::{Controller, Device};
use crate::proto::p4::v1 as p4;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tonic::Status;

/// Whether connection `conn` is the primary controller's.
fn is_primary(device: &Device, conn: u64) -> bool {
    let a = device.arb.lock().unwrap_or_else(|p| p.into_inner());
    a.controllers
        .get(&conn)
        .map(|c| Some(c.election_id) == a.primary())
        .unwrap_or(false)
}

/// Serve the stream `inbound` of controller connection `conn` (opened by `caller` from `peer`)
/// until it ends; responses and errors go to `tx`.
pub(crate) async fn run(
    device: Arc<Device>,
    revoked: Option<Arc<Revoked>>,
    caller: Caller,
    peer: String,
    conn: u64,
    mut inbound: tonic::Streaming<p4::StreamMessageRequest>,
    tx: mpsc::Sender<Result<p4::StreamMessageResponse, Status>>,
) {
    while let Some(msg) = inbound.next().await {
        let Ok(msg) = msg else { break };
        // a certificate revoked while its stream is open: the stream ends at its next
        // message (and the periodic check below takes it out of the arbitration)
        if let (Some(r), Some(id)) = (&revoked, &caller.identity) {
            if let Err((_, why)) = r.check(&id.serial) {
                rtlog!(
                    crate::log::Level::Info,
                    "P4Runtime: {peer} ({}): stream closed: {why}",
                    id.describe()
                );
                let _ = tx.send(Err(Status::unauthenticated(why))).await;
                break;
            }
        }
        match msg.update {
            Some(p4::stream_message_request::Update::Arbitration(arb)) => {
                let id = eid(&arb.election_id);
                let role = arb
                    .role
                    .as_ref()
                    .map(|r| r.name.clone())
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(|| "default".into());
                if arb.device_id != device.device_id {
                    let arbitrated = device
                        .arb
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .controllers
                        .contains_key(&conn);
                    if arbitrated {
                        // the specification: a controller cannot move its stream to another
                        // device
                        rtlog!(
                            crate::log::Level::Info,
                            "P4Runtime: {peer}: arbitration for device {} refused: the stream belongs to device {}",
                            arb.device_id,
                            device.device_id
                        );
                        let _ = tx
                            .send(Err(Status::failed_precondition(format!(
                                "this stream arbitrated for device {}; a controller cannot change its device id (to {})",
                                device.device_id, arb.device_id
                            ))))
                            .await;
                        continue;
                    }
                    rtlog!(
                        crate::log::Level::Info,
                        "P4Runtime: {peer}: arbitration for device {} refused (this is device {})",
                        arb.device_id,
                        device.device_id
                    );
                    let _ = tx
                        .send(Err(Status::not_found(format!(
                            "no device with id {}",
                            arb.device_id
                        ))))
                        .await;
                    continue;
                }
                let notify = {
                    let mut a = device.arb.lock().unwrap_or_else(|p| p.into_inner());
                    if a.controllers
                        .iter()
                        .any(|(k, c)| *k != conn && c.election_id == id)
                    {
                        rtlog!(crate::log::Level::Info, "P4Runtime: {peer}: arbitration refused: another controller uses election id {id}");
                        let _ = tx.try_send(Err(Status::invalid_argument(
                            "another controller uses this election id",
                        )));
                        continue;
                    }
                    let before = a.primary_info();
                    a.controllers.insert(
                        conn,
                        Controller {
                            election_id: id,
                            tx: tx.clone(),
                            peer: peer.clone(),
                            identity: caller.identity.clone(),
                        },
                    );
                    let after = a.primary_info();
                    let primary = after.as_ref().is_some_and(|(p, _)| *p == id);
                    rtlog!(
                        crate::log::Level::Info,
                        "P4Runtime: {peer}: arbitration: device {}, election id {id}, role {role}: {}",
                        device.device_id,
                        if primary {
                            "primary".to_string()
                        } else {
                            format!("backup (the primary has election id {})", after.as_ref().map(|x| x.0).unwrap_or(0))
                        }
                    );
                    log_primary_change(device.device_id, &before, &after);
                    arbitration_messages(&a, device.device_id)
                };
                for (t, m) in notify {
                    let _ = t.send(Ok(m)).await;
                }
            }
            Some(p4::stream_message_request::Update::Packet(po)) => {
                let is_primary = is_primary(&device, conn);
                let pl = device
                    .pipeline
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                let r = match (is_primary, pl) {
                    (false, _) => Err(Status::permission_denied(
                        "only the primary controller may send packets",
                    )),
                    (_, None) => Err(Status::failed_precondition(
                        "no forwarding pipeline is configured",
                    )),
                    (true, Some(pl)) => match &pl.translator {
                        Some(tr) => tr
                            .packet_out(&po)
                            .and_then(|po| device.packet_out(&pl.engine.prog, &po)),
                        None => device.packet_out(&pl.engine.prog, &po),
                    },
                };
                if let Err(st) = r {
                    let err = p4::StreamError {
                        canonical_code: st.code() as i32,
                        message: st.message().to_string(),
                        space: String::new(),
                        code: 0,
                        details: Some(p4::stream_error::Details::PacketOut(p4::PacketOutError {
                            packet_out: Some(po),
                        })),
                    };
                    let _ = tx
                        .send(Ok(p4::StreamMessageResponse {
                            update: Some(p4::stream_message_response::Update::Error(err)),
                        }))
                        .await;
                }
            }
            Some(p4::stream_message_request::Update::DigestAck(ack)) => {
                let is_primary = is_primary(&device, conn);
                if is_primary {
                    device.digest_ack(&ack);
                }
            }
            Some(_) | None => {}
        }
    }
    // the controller went away: a new primary may be elected (and digest data it did not
    // acknowledge may be sent again)
    let notify =
        {
            let mut a = device.arb.lock().unwrap_or_else(|p| p.into_inner());
            let was_primary = a
                .controllers
                .get(&conn)
                .map(|c| Some(c.election_id) == a.primary())
                .unwrap_or(false);
            let before = a.primary_info();
            let gone = a.controllers.remove(&conn);
            match &gone {
                Some(c) => {
                    rtlog!(
                crate::log::Level::Info,
                "P4Runtime: stream channel of {peer} closed (device {}, election id {}, {})",
                device.device_id,
                c.election_id,
                if was_primary { "was primary" } else { "was backup" }
            )
                }
                None => rtlog!(
                    crate::log::Level::Info,
                    "P4Runtime: stream channel of {peer} closed (it had not arbitrated)"
                ),
            }
            if was_primary {
                device.digest_cache_clear();
            }
            log_primary_change(device.device_id, &before, &a.primary_info());
            arbitration_messages(&a, device.device_id)
        };
    for (t, m) in notify {
        let _ = t.send(Ok(m)).await;
    }
}
