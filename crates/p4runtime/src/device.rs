//! The P4Runtime device as the switch uses it: the installed forwarding pipeline, the controllers
//! connected to it (for packet-in, digests and idle-timeout notifications), the packet-out queue,
//! digest state and port liveness. Its digests are in `digests.rs`, packet-in and packet-out in
//! `packet_io.rs`, idle-timeout notifications in `idle_timeouts.rs`.

use crate::proto::p4::config::v1 as cfg;
use crate::proto::p4::v1 as p4;
use p4sec_engine::Engine;
use p4sec_externs::iface::ExternType;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::mpsc;
use tonic::Status;

/// The forwarding pipeline installed on the device.
pub struct Pipeline {
    pub engine: Arc<Engine>,
    pub p4info: cfg::P4Info,
    pub device_config: Vec<u8>,
    pub cookie: u64,
    /// The P4Runtime type translation of the program's `@p4runtime_translation` types (None: it has
    /// none).
    pub translator: Option<Arc<crate::translate::Translator>>,
}

pub(crate) struct Controller {
    pub(crate) election_id: u128,
    pub(crate) tx: mpsc::Sender<Result<p4::StreamMessageResponse, Status>>,
    /// The client's address (for the log).
    pub(crate) peer: String,
    /// Its certificate under mutual TLS: the primary's Write and SetForwardingPipelineConfig must
    /// come with the same one.
    pub(crate) identity: Option<crate::authz::Identity>,
}

#[derive(Default)]
pub(crate) struct Arbitration {
    pub(crate) next: u64,
    pub(crate) controllers: HashMap<u64, Controller>,
}

impl Arbitration {
    pub(crate) fn primary(&self) -> Option<u128> {
        self.controllers.values().map(|c| c.election_id).max()
    }
    /// The primary controller's election id and address.
    pub(crate) fn primary_info(&self) -> Option<(u128, String)> {
        self.controllers
            .values()
            .max_by_key(|c| c.election_id)
            .map(|c| (c.election_id, c.peer.clone()))
    }
    /// The primary controller's certificate (None: no primary, or no mutual TLS).
    pub(crate) fn primary_identity(&self) -> Option<&crate::authz::Identity> {
        self.controllers
            .values()
            .max_by_key(|c| c.election_id)
            .and_then(|c| c.identity.as_ref())
    }
}

/// One P4Runtime device.
pub struct Device {
    pub device_id: u64,
    pub pipeline: RwLock<Option<Arc<Pipeline>>>,
    pub(crate) arb: Mutex<Arbitration>,
    /// The CPU port: frames the pipeline sends there go to the primary controller as PacketIn, and
    /// PacketOut frames enter the pipeline as received on it.
    pub cpu_port: Option<u32>,
    /// PacketOut frames (controller header already prepended) on their way to the data plane: one
    /// datagram per frame; the packet loop polls `packet_out_rx`.
    pub(crate) packet_out_tx: std::os::unix::net::UnixDatagram,
    pub packet_out_rx: std::os::unix::net::UnixDatagram,
    /// PacketIn messages that could not be delivered (no primary controller, or its queue was
    /// full).
    pub packet_in_dropped: std::sync::atomic::AtomicU64,
    /// A pipeline saved by VERIFY_AND_SAVE, waiting for COMMIT.
    pub(crate) saved: Mutex<Option<Arc<Pipeline>>>,
    /// Digests the controller asked for (DigestEntry writes): digest id → configuration.
    pub(crate) digest_configs: Mutex<HashMap<u32, p4::digest_entry::Config>>,
    pub(crate) next_list_id: std::sync::atomic::AtomicU64,
    /// Digest messages dropped: not enabled by the controller, or no primary controller to receive
    /// them.
    pub digests_dropped: std::sync::atomic::AtomicU64,
    /// Digest messages not sent because a digest list holding the same data waits for its
    /// acknowledgement.
    pub digests_deduplicated: std::sync::atomic::AtomicU64,
    pub(crate) digest_cache: Mutex<crate::digest_cache::DigestCache>,
    /// One Write (or reconciliation) at a time: members, groups and the entries that use them
    /// change together.
    pub(crate) writes: Mutex<()>,
    /// Port liveness reported by the data plane (watch ports of selector group members), followed
    /// by every pipeline's engine.
    ports: Arc<p4sec_engine::tables::PortStatus>,
    /// The extern types pipelines of this device may instantiate.
    externs: Vec<Box<dyn ExternType>>,
    /// Maps for translated types (`p4sec switch --translate`), by type name or URI; used by the
    /// pipelines built after they are set.
    pub translate_maps: RwLock<crate::translate::Maps>,
}

impl Device {
    /// A device with no pipeline yet. `cpu_port`: the port whose frames are packet-in/out;
    /// `externs`: the extern types its pipelines may instantiate (the switch's extern set,
    /// assembled once by its caller).
    pub fn new(
        device_id: u64,
        cpu_port: Option<u32>,
        externs: Vec<Box<dyn ExternType>>,
    ) -> Arc<Device> {
        let (tx, rx) =
            std::os::unix::net::UnixDatagram::pair().expect("a socket pair for packet-out");
        let ports = Arc::new(p4sec_engine::tables::PortStatus::default());
        let _ = tx.set_nonblocking(true);
        let _ = rx.set_nonblocking(true);
        Arc::new(Device {
            device_id,
            pipeline: RwLock::new(None),
            arb: Mutex::new(Arbitration::default()),
            cpu_port,
            packet_out_tx: tx,
            packet_out_rx: rx,
            packet_in_dropped: std::sync::atomic::AtomicU64::new(0),
            saved: Mutex::new(None),
            digest_configs: Mutex::new(HashMap::new()),
            next_list_id: std::sync::atomic::AtomicU64::new(1),
            digests_dropped: std::sync::atomic::AtomicU64::new(0),
            digests_deduplicated: std::sync::atomic::AtomicU64::new(0),
            digest_cache: Mutex::new(Default::default()),
            writes: Mutex::new(()),
            ports,
            externs,
            translate_maps: RwLock::new(Default::default()),
        })
    }

    /// A pipeline built from p4sec's program file (`program.json` from `p4sec compile`, as it is or
    /// wrapped in a `p4.tmp.P4DeviceConfig`) with this device's extern set: `p4info`, if given,
    /// must name only the program's tables; otherwise it is generated from the program. The one
    /// place a pipeline is built from a program file (start-up and SetForwardingPipelineConfig).
    pub fn build_pipeline(
        &self,
        device_config: Vec<u8>,
        p4info: Option<cfg::P4Info>,
        cookie: u64,
    ) -> Result<Pipeline, String> {
        let prog = crate::p4config::program(&device_config)?;
        if let Some(p4info) = &p4info {
            for t in &p4info.tables {
                let id = t.preamble.as_ref().map(|p| p.id).unwrap_or(0);
                if !prog.tables.iter().any(|x| x.id == id) {
                    return Err(format!(
                        "the p4info's table id {id} is not in the device config"
                    ));
                }
            }
        }
        if let Some(inst) = prog
            .externs
            .iter()
            .find(|i| !self.externs.iter().any(|t| t.name() == i.type_name))
        {
            let known: Vec<&str> = self.externs.iter().map(|t| t.name()).collect();
            return Err(format!(
                "extern `{}` (type `{}`) is not implemented by this switch (its extern types: {}; test externs are loaded by `p4sec stf` only)",
                inst.name,
                inst.type_name,
                known.join(", ")
            ));
        }
        let engine = Engine::new(Arc::new(prog), &self.externs)?;
        engine.profile_ports(self.ports.clone());
        let p4info = p4info.unwrap_or_else(|| crate::p4info::p4info(&engine.prog));
        let translator = crate::translate::Translator::new(
            &engine.prog,
            &self
                .translate_maps
                .read()
                .unwrap_or_else(|p| p.into_inner()),
        )?
        .map(Arc::new);
        Ok(Pipeline {
            engine: Arc::new(engine),
            p4info,
            device_config,
            cookie,
            translator,
        })
    }

    /// The extern type named `name` in this device's extern set.
    pub(crate) fn extern_type(&self, name: &str) -> Option<&dyn ExternType> {
        self.externs
            .iter()
            .find(|t| t.name() == name)
            .map(|t| t.as_ref())
    }

    /// The data plane's report of a port's state (once a second per port). A change reaches the
    /// entries whose groups have members watching the port.
    pub fn set_port_up(&self, port: u32, up: bool) {
        if !self.ports.set(port, up) {
            return;
        }
        rtlog!(
            crate::log::Level::Debug,
            "port {port} is {}",
            if up { "up" } else { "down" }
        );
        let Some(engine) = self.engine() else { return };
        if let Err(e) = engine.profile_port_changed(port) {
            rtlog!(
                crate::log::Level::Warn,
                "port {port}: the groups watching it could not be updated: {}",
                e.message
            );
        }
    }

    pub fn engine(&self) -> Option<Arc<Engine>> {
        self.pipeline
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|p| p.engine.clone())
    }
}

/// The data path's view of its control plane (the switch's seam, `p4sec_switch::control_plane`).
impl p4sec_switch::control_plane::ControlPlane for Device {
    fn engine(&self) -> Option<Arc<Engine>> {
        Device::engine(self)
    }
    fn cpu_port(&self) -> Option<u32> {
        self.cpu_port
    }
    fn packet_in(&self, engine: &Engine, frame: &[u8]) {
        Device::packet_in(self, engine, frame)
    }
    fn packet_out(&self) -> &std::os::unix::net::UnixDatagram {
        &self.packet_out_rx
    }
    fn set_port_up(&self, port: u32, up: bool) {
        Device::set_port_up(self, port, up)
    }
    fn deliver_digests(&self, engine: &Engine) {
        Device::deliver_digests(self, engine)
    }
    fn dropped(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.packet_in_dropped.load(Relaxed),
            self.digests_dropped.load(Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `p4sec switch` builds pipelines with the production extern set: a program that needs a test
    /// extern gets an error naming the extern, the switch's extern types, and where test externs
    /// are loaded.
    #[test]
    fn a_test_extern_is_refused_with_a_precise_error() {
        let src = "#include <core.p4>\n#include <v1model.p4>\nextern void extern_func(out bit<32> d, bit<32> s);\n\
            header h_t { bit<32> a; bit<32> b; }\nstruct H { h_t h; }\nstruct M {}\n\
            parser P(packet_in p, out H h, inout M m, inout standard_metadata_t s) { state start { p.extract(h.h); transition accept; } }\n\
            control V(inout H h, inout M m) { apply {} }\n\
            control I(inout H h, inout M m, inout standard_metadata_t s) { apply { extern_func(h.h.a, h.h.b); } }\n\
            control E(inout H h, inout M m, inout standard_metadata_t s) { apply {} }\n\
            control C(inout H h, inout M m) { apply {} }\n\
            control D(packet_out p, in H h) { apply { p.emit(h.h); } }\n\
            V1Switch(P(), V(), I(), E(), C(), D()) main;\n";
        let prog = p4sec_frontend::compile_str("t.p4", src, &Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            prog.externs.iter().any(|e| e.type_name == "extern_func"),
            "the program instantiates the test extern"
        );
        let device = Device::new(1, None, p4sec_externs::p4::registry());
        let e = device
            .build_pipeline(prog.to_json().into_bytes(), None, 0)
            .map(|_| ())
            .unwrap_err();
        assert!(
            e.contains("extern `extern_func`")
                && e.contains("esp_sad")
                && e.contains("`p4sec stf` only"),
            "{e}"
        );
        // with the extern in the device's set, the same program loads, its P4Info generated
        let mut externs = p4sec_externs::p4::registry();
        externs.extend(p4sec_engine::test_externs::registry());
        let device = Device::new(1, None, externs);
        let pl = device
            .build_pipeline(prog.to_json().into_bytes(), None, 7)
            .unwrap();
        assert_eq!(pl.cookie, 7);
        assert_eq!(
            pl.p4info,
            crate::p4info::p4info(&pl.engine.prog),
            "the P4Info is generated from the program"
        );
    }

    /// A P4Info naming a table the program does not have is refused.
    #[test]
    fn a_p4info_for_another_program_is_refused() {
        let prog = p4sec_frontend::compile_str(
            "g.p4",
            include_str!("../../../programs/ipsec_gateway.p4"),
            &Default::default(),
        )
        .unwrap();
        let device = Device::new(1, None, p4sec_externs::p4::registry());
        let mut info = crate::p4info::p4info(&prog);
        assert!(device
            .build_pipeline(prog.to_json().into_bytes(), Some(info.clone()), 0)
            .is_ok());
        info.tables[0].preamble.as_mut().unwrap().id = 0x0200_0000 | 0xfff_fff;
        let e = device
            .build_pipeline(prog.to_json().into_bytes(), Some(info), 0)
            .map(|_| ())
            .unwrap_err();
        assert!(e.contains("is not in the device config"), "{e}");
    }
}
