//! The seam between the data path and its control plane: what the workers need from whoever
//! programs the switch (the P4Runtime server implements it, `p4sec_p4runtime::device::Device`):
//! the program slot, packet-in and packet-out through the CPU port, digests and port status; and
//! what a running switch ([`crate::runner`]) needs from it beyond the data path ([`Controller`]):
//! the program given at start and its server's life. The switch depends on the engine only; the
//! control plane depends on the switch.

use p4sec_engine::Engine;
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;

/// What the data path needs from its control plane. Called by the workers: every method must be
/// cheap and must not block for long (packet-ins and digests are queued, not sent, here).
pub trait ControlPlane: Send + Sync {
    /// The program the workers run now (`None` before one is loaded). Workers compare it at every
    /// batch and pick up a new one.
    fn engine(&self) -> Option<Arc<Engine>>;
    /// The CPU port: frames the program sends there go to the controller (packet-in), and the
    /// controller's packet-outs enter the pipeline from it.
    fn cpu_port(&self) -> Option<u32>;
    /// A frame `engine`'s program sent to the CPU port.
    fn packet_in(&self, engine: &Engine, frame: &[u8]);
    /// The controller's packet-outs waiting to enter the pipeline: a non-blocking datagram socket
    /// the workers poll with their ports.
    fn packet_out(&self) -> &UnixDatagram;
    /// A port's link is `up` (or not): reported when it changes.
    fn set_port_up(&self, port: u32, up: bool);
    /// Hand the digests `engine` has queued to the controller.
    fn deliver_digests(&self, engine: &Engine);
    /// What the control channel dropped so far: (packet-ins with no controller to take them,
    /// digests not enabled or not deliverable).
    fn dropped(&self) -> (u64, u64);
}

/// The control plane as a running switch (`p4sec switch`, [`crate::runner`]) drives it: its
/// seam to the data path, the program given at start, and its server (the `p4sec` binary
/// implements it with the P4Runtime device and gRPC server).
pub trait Controller {
    /// What the data path's workers (and the metrics) use of it.
    fn plane(&self) -> Arc<dyn ControlPlane>;
    /// Install the program file given at start (its bytes); an error says what is wrong with it.
    fn load_program(&self, program: Vec<u8>) -> Result<(), String>;
    /// Start the server, once the ports are open. `batch`: the switch is a batch run (pcap inputs
    /// only, it ends by itself) with its program given, which needs a server only if one was
    /// asked for.
    fn serve(&mut self, batch: bool) -> Result<(), String>;
    /// Once the server has ended by itself: how (an error: why it failed); `None` while it runs
    /// (or when there is none).
    fn ended(&mut self) -> Option<Result<(), String>>;
    /// Stop the server (the run is over).
    fn stop(&mut self);
}
