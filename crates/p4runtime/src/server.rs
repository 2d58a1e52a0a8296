//! The `p4.v1.P4Runtime` gRPC service over a [`Device`]: pipeline configuration
//! (`pipeline_config.rs`), Write and Read (delegated to `write.rs` and `read.rs`), the stream
//! channel (each controller's stream served by `stream_channel.rs`, primary arbitration in
//! `arbitration.rs`), and TLS with the client certificates' authorization (`callers.rs`,
//! `authz.rs`).

use crate::arbitration::drop_revoked;
use crate::authz::{Access, Policy, Revoked};
use crate::callers::{caller_of, peer_of, refuse, Caller};
use crate::codec::eid;
pub use crate::device::{Device, Pipeline};
use crate::proto::p4::v1 as p4;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

/// A Write of at least this many updates is followed by [`release_free_memory`].
const TRIM_AFTER_UPDATES: usize = 1024;

/// Give the memory freed by a large Write (its decoded request, the per-update state, the replaced
/// table versions) back to the system. glibc's allocator keeps freed memory in its per-thread
/// arenas: without this, 60k-entry insert/delete cycles left ~300 MB resident with empty tables
/// (docs/switch.md, Hardening).
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it takes no pointer.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The largest request the server decodes (and response it sends): 64 MiB. A Write of ~1 M
/// exact-match entries fits; the largest table a program may declare cannot take more entries than
/// that in one batch anyway. A larger message is refused by gRPC before it is decoded (OUT_OF_RANGE
/// "message length too large"), so no request costs more memory than this plus its decoded form.
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// The gRPC service.
pub struct Service {
    pub device: Arc<Device>,
    /// Under mutual TLS: who may write and who may only read. None: every client that reaches the
    /// server may do everything (plaintext or server-only TLS).
    pub authz: Option<Arc<Policy>>,
    /// Under mutual TLS: the revoked client certificates (`--tls-revoked`).
    pub revoked: Option<Arc<Revoked>>,
}

type StreamOut<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

impl Service {
    pub(crate) fn check_device(&self, id: u64) -> Result<(), Status> {
        if id != self.device.device_id {
            return Err(Status::not_found(format!(
                "no device with id {id} (this is device {})",
                self.device.device_id
            )));
        }
        Ok(())
    }
    /// Who is calling, and what it may do; UNAUTHENTICATED without a client certificate, and
    /// PERMISSION_DENIED for a certificate no list names, when a policy is in force.
    fn caller<T>(&self, req: &Request<T>, what: &str) -> Result<Caller, Status> {
        caller_of(
            self.authz.as_deref(),
            self.revoked.as_deref(),
            req.peer_certs()
                .as_ref()
                .and_then(|c| c.first())
                .map(|c| c.as_ref()),
            &peer_of(req),
            what,
        )
    }
    /// The caller may write: a writer (PERMISSION_DENIED for a reader).
    fn writer<T>(&self, req: &Request<T>, what: &str) -> Result<Caller, Status> {
        let c = self.caller(req, what)?;
        if c.access != Access::Write {
            return Err(refuse(&c, &peer_of(req), what));
        }
        Ok(c)
    }
    /// The request comes from the primary controller: its election id is the primary's and, under
    /// a policy, its certificate is the one the primary's stream arbitrated with (another client
    /// cannot borrow the primary's election id).
    pub(crate) fn check_primary(
        &self,
        election: &Option<p4::Uint128>,
        caller: &Caller,
    ) -> Result<(), Status> {
        let arb = self.device.arb.lock().unwrap_or_else(|p| p.into_inner());
        let primary_cert = arb.primary_identity().map(|i| i.der.as_slice());
        match arb.primary() {
            Some(p)
                if p == eid(election)
                    && (self.authz.is_none()
                        || primary_cert == caller.identity.as_ref().map(|i| i.der.as_slice())) =>
            {
                Ok(())
            }
            Some(_) => Err(Status::permission_denied(
                "this client is not the primary controller",
            )),
            None => Err(Status::permission_denied(
                "no controller has arbitrated on the stream channel",
            )),
        }
    }
    pub(crate) fn pipeline(&self) -> Result<Arc<Pipeline>, Status> {
        self.device
            .pipeline
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| Status::failed_precondition("no forwarding pipeline is configured"))
    }
}

#[tonic::async_trait]
impl p4::p4_runtime_server::P4Runtime for Service {
    async fn write(
        &self,
        req: Request<p4::WriteRequest>,
    ) -> Result<Response<p4::WriteResponse>, Status> {
        let caller = self.writer(&req, "Write")?;
        let r = req.into_inner();
        let n = r.updates.len();
        let res = (|| {
            self.check_device(r.device_id)?;
            self.check_primary(&r.election_id, &caller)?;
            let pl = self.pipeline()?;
            crate::write::write(&self.device, &pl, &r).map(Response::new)
        })();
        drop(r);
        if n >= TRIM_AFTER_UPDATES {
            release_free_memory();
        }
        res
    }

    type ReadStream = StreamOut<p4::ReadResponse>;

    async fn read(
        &self,
        req: Request<p4::ReadRequest>,
    ) -> Result<Response<Self::ReadStream>, Status> {
        self.caller(&req, "Read")?;
        let r = req.into_inner();
        self.check_device(r.device_id)?;
        let pl = self.pipeline()?;
        let entities = crate::read::read(&self.device, &pl, &r)?;
        let stream = tokio_stream::iter(vec![Ok(p4::ReadResponse { entities })]);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn set_forwarding_pipeline_config(
        &self,
        req: Request<p4::SetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4::SetForwardingPipelineConfigResponse>, Status> {
        let peer = peer_of(&req);
        let caller = self.writer(&req, "SetForwardingPipelineConfig")?;
        let r = req.into_inner();
        let (action, election) = (r.action, eid(&r.election_id));
        let name = p4::set_forwarding_pipeline_config_request::Action::try_from(action)
            .map(|a| a.as_str_name().to_string())
            .unwrap_or_else(|_| action.to_string());
        let cookie = r
            .config
            .as_ref()
            .and_then(|c| c.cookie.as_ref())
            .map(|c| c.cookie)
            .unwrap_or(0);
        let res = self.set_pipeline(r, &caller);
        match &res {
            Ok(_) => rtlog!(
                crate::log::Level::Info,
                "P4Runtime: SetForwardingPipelineConfig {name} from {peer} (election id {election}, cookie {cookie}): done{}",
                match self.device.pipeline.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
                    Some(pl) => {
                        let n = pl.engine.prog.tables.len();
                        format!("; the pipeline has {n} table{} (cookie {})", if n == 1 { "" } else { "s" }, pl.cookie)
                    }
                    None => String::new(),
                }
            ),
            Err(e) => rtlog!(
                crate::log::Level::Info,
                "P4Runtime: SetForwardingPipelineConfig {name} from {peer} (election id {election}) failed: {:?}: {}",
                e.code(),
                e.message()
            ),
        }
        res
    }

    async fn get_forwarding_pipeline_config(
        &self,
        req: Request<p4::GetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4::GetForwardingPipelineConfigResponse>, Status> {
        self.caller(&req, "GetForwardingPipelineConfig")?;
        let r = req.into_inner();
        self.check_device(r.device_id)?;
        let pl = self.pipeline()?;
        // as BMv2 answers: the cookie always, the P4Info and the device config (the bytes the
        // controller sent) as the response type asks
        use p4::get_forwarding_pipeline_config_request::ResponseType as R;
        let rt = R::try_from(r.response_type).map_err(|_| {
            Status::invalid_argument(format!("unknown response type {}", r.response_type))
        })?;
        let config = p4::ForwardingPipelineConfig {
            p4info: matches!(rt, R::All | R::P4infoAndCookie).then(|| pl.p4info.clone()),
            p4_device_config: if matches!(rt, R::All | R::DeviceConfigAndCookie) {
                pl.device_config.clone()
            } else {
                vec![]
            },
            cookie: Some(p4::forwarding_pipeline_config::Cookie { cookie: pl.cookie }),
        };
        Ok(Response::new(p4::GetForwardingPipelineConfigResponse {
            config: Some(config),
        }))
    }

    type StreamChannelStream = StreamOut<p4::StreamMessageResponse>;

    async fn stream_channel(
        &self,
        req: Request<tonic::Streaming<p4::StreamMessageRequest>>,
    ) -> Result<Response<Self::StreamChannelStream>, Status> {
        let peer = peer_of(&req);
        // a stream is for controllers: a reader or a stranger may not arbitrate at all
        let caller = self.writer(&req, "StreamChannel (arbitration)")?;
        let inbound = req.into_inner();
        let (tx, rx) = mpsc::channel(64);
        let device = self.device.clone();
        let revoked = self.revoked.clone();
        let conn = {
            let mut a = device.arb.lock().unwrap_or_else(|p| p.into_inner());
            a.next += 1;
            a.next
        };
        rtlog!(
            crate::log::Level::Info,
            "P4Runtime: stream channel opened by {peer}"
        );
        tokio::spawn(crate::stream_channel::run(
            device, revoked, caller, peer, conn, inbound, tx,
        ));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn capabilities(
        &self,
        req: Request<p4::CapabilitiesRequest>,
    ) -> Result<Response<p4::CapabilitiesResponse>, Status> {
        self.caller(&req, "Capabilities")?;
        Ok(Response::new(p4::CapabilitiesResponse {
            p4runtime_api_version: "1.4.1".into(),
        }))
    }
}

/// Serve P4Runtime on `addr` until the process ends.
pub async fn serve(addr: std::net::SocketAddr, device: Arc<Device>) -> Result<(), String> {
    serve_tls(addr, device, None).await
}

pub use crate::listen::TlsFiles;

pub async fn serve_tls(
    addr: std::net::SocketAddr,
    device: Arc<Device>,
    tls: Option<TlsFiles>,
) -> Result<(), String> {
    let l = crate::listen::listen(&addr.to_string(), "--grpc", tls)?;
    serve_on(l, device).await
}

/// Serve P4Runtime on a [`Listener`](crate::listen::Listener) until the process ends (inside a
/// Tokio runtime).
pub async fn serve_on(l: crate::listen::Listener, device: Arc<Device>) -> Result<(), String> {
    // idle timeouts, and the revocation of connected controllers' certificates, are looked at every
    // 100 ms
    let (d, r) = (device.clone(), l.revoked.clone());
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
        loop {
            tick.tick().await;
            d.check_idle();
            if let Some(r) = &r {
                for (t, m) in drop_revoked(&d, r) {
                    let _ = t.send(m).await;
                }
            }
        }
    });
    let svc = p4::p4_runtime_server::P4RuntimeServer::new(Service {
        device,
        authz: l.authz,
        revoked: l.revoked,
    })
    .max_decoding_message_size(MAX_MESSAGE_BYTES)
    .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let socket =
        tokio::net::TcpListener::from_std(l.socket).map_err(|e| format!("gRPC server: {e}"))?;
    let incoming = tonic::transport::server::TcpIncoming::from_listener(socket, true, None)
        .map_err(|e| format!("gRPC server: {e}"))?;
    let mut b = l.builder;
    b.add_service(svc)
        .serve_with_incoming(incoming)
        .await
        .map_err(|e| format!("gRPC server: {}", crate::listen::chain(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authz::Identity;
    use crate::codec::to_uint128;
    use crate::device::Controller;
    use tonic::Code;

    fn policy() -> Policy {
        Policy::new(&["controller".into()], &["monitor".into()]).unwrap()
    }
    fn caller(name: &str, access: Access) -> Caller {
        Caller {
            access,
            identity: Some(Identity {
                names: vec![name.into()],
                der: format!("cert of {name}").into_bytes(),
                serial: "1".into(),
            }),
        }
    }

    #[test]
    fn without_a_policy_everyone_writes_and_with_one_a_certificate_is_needed() {
        assert_eq!(
            caller_of(None, None, None, "p", "Write").unwrap().access,
            Access::Write
        );
        let p = policy();
        let e = caller_of(Some(&p), None, None, "p", "Write").err().unwrap();
        assert_eq!(e.code(), Code::Unauthenticated);
        let e = caller_of(Some(&p), None, Some(b"junk"), "p", "Write")
            .err()
            .unwrap();
        assert_eq!(e.code(), Code::Unauthenticated);
    }

    #[test]
    fn refusals_name_what_the_client_may_do() {
        let e = refuse(&caller("monitor", Access::Read), "p", "Write");
        assert_eq!(e.code(), Code::PermissionDenied);
        assert!(e.message().contains("may only read"), "{}", e.message());
        let e = refuse(&caller("eve", Access::Denied), "p", "Read");
        assert_eq!(e.code(), Code::PermissionDenied);
        assert!(e.message().contains("not allowed"), "{}", e.message());
    }

    /// The primary's election id alone does not make a request the primary's: under a policy the
    /// certificate must be the one its stream arbitrated with.
    #[test]
    fn the_primary_election_id_is_bound_to_the_primary_certificate() {
        let device = Device::new(1, None, vec![]);
        let svc = Service {
            device: device.clone(),
            authz: Some(Arc::new(policy())),
            revoked: None,
        };
        let open = Service {
            device: device.clone(),
            authz: None,
            revoked: None,
        };
        let ctl = caller("controller", Access::Write);
        let other = caller("controller-b", Access::Write);
        let election = Some(to_uint128(1));
        // nobody arbitrated
        let e = svc.check_primary(&election, &ctl).unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied);
        let (tx, _rx) = mpsc::channel(1);
        device.arb.lock().unwrap().controllers.insert(
            7,
            Controller {
                election_id: 1,
                tx,
                peer: "p".into(),
                identity: ctl.identity.clone(),
            },
        );
        svc.check_primary(&election, &ctl).unwrap();
        // another writer certificate with the primary's election id, and the primary's
        // certificate with another election id: refused
        let e = svc.check_primary(&election, &other).unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied);
        let e = svc.check_primary(&Some(to_uint128(2)), &ctl).unwrap_err();
        assert_eq!(e.code(), Code::PermissionDenied);
        // without a policy (plaintext) the election id is all there is
        open.check_primary(&election, &other).unwrap();
    }
}
