//! The switch's control plane in `p4sec switch`: the P4Runtime device (its extern set, type
//! translations, the program given at start) and its gRPC server on a Tokio runtime, as the
//! [`Controller`] the switch's run drives ([`p4sec_switch::runner`]).

use crate::server::TlsFiles;
use crate::Device;
use p4sec_switch::control_plane::{ControlPlane, Controller};
use p4sec_switch::log::Level;
use p4sec_switch::p4log;
use std::sync::Arc;

/// The P4Runtime server's address without `--grpc`.
const DEFAULT_GRPC: &str = "0.0.0.0:9559";

/// The P4Runtime device and, once serving, its gRPC server.
pub struct P4RuntimeControl {
    device: Arc<Device>,
    device_id: u64,
    grpc: String,
    /// Was the address given (`--grpc`, `--grpc-server-addr`)? A batch run serves only then.
    grpc_given: bool,
    tls: Option<TlsFiles>,
    rt: Option<tokio::runtime::Runtime>,
    server: Option<tokio::task::JoinHandle<Result<(), String>>>,
}

impl P4RuntimeControl {
    /// The device, with the switch's extern set (the device builds every pipeline with it: the
    /// program given at start and those SetForwardingPipelineConfig installs; test externs are not
    /// in it, `p4sec stf` only) and the type translations. Fails on an address that is no
    /// HOST:PORT.
    pub fn new(
        device_id: u64,
        cpu_port: Option<u32>,
        grpc: Option<String>,
        tls: Option<TlsFiles>,
        translate: crate::translate::Maps,
    ) -> Result<P4RuntimeControl, String> {
        let grpc_given = grpc.is_some();
        let grpc = grpc.unwrap_or_else(|| DEFAULT_GRPC.to_string());
        crate::listen::resolve(&grpc, "--grpc")?;
        let device = Device::new(device_id, cpu_port, p4sec_externs::p4::registry());
        *device
            .translate_maps
            .write()
            .unwrap_or_else(|p| p.into_inner()) = translate;
        Ok(P4RuntimeControl {
            device,
            device_id,
            grpc,
            grpc_given,
            tls,
            rt: None,
            server: None,
        })
    }
}

impl Controller for P4RuntimeControl {
    fn plane(&self) -> Arc<dyn ControlPlane> {
        self.device.clone()
    }

    fn load_program(&self, program: Vec<u8>) -> Result<(), String> {
        let pl = self.device.build_pipeline(program, None, 0)?;
        *self
            .device
            .pipeline
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(pl));
        Ok(())
    }

    fn serve(&mut self, batch: bool) -> Result<(), String> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        // a batch run with its program given needs no P4Runtime server unless asked for
        if batch && !self.grpc_given {
            p4log!(
                Level::Info,
                "batch run: no P4Runtime server (give --grpc ADDR for one)"
            );
        } else {
            // bound (and TLS read) before saying so: a port in use or a bad certificate is named
            let l = crate::listen::listen(&self.grpc, "--grpc", self.tls.take())?;
            let at = l.local_addr();
            p4log!(Level::Info, "P4Runtime (device {}) on {at}", self.device_id);
            let device = self.device.clone();
            self.server = Some(rt.spawn(crate::server::serve_on(l, device)));
        }
        self.rt = Some(rt);
        Ok(())
    }

    fn ended(&mut self) -> Option<Result<(), String>> {
        if !self.server.as_ref()?.is_finished() {
            return None;
        }
        let (server, rt) = (self.server.take()?, self.rt.as_ref()?);
        Some(match rt.block_on(server) {
            Ok(r) => r,
            Err(e) => Err(format!("the P4Runtime server failed: {e}")),
        })
    }

    fn stop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(std::time::Duration::from_millis(500));
        }
    }
}
