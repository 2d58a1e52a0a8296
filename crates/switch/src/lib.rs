//! The switch data plane: its ports and the packet loop that feeds received frames to the engine
//! installed on the P4Runtime device and transmits what it emits. The engine is taken from the
//! device for every batch, so a new pipeline pushed by the controller takes effect without
//! restarting the loop.
//!
//! Ports ([`PortSpec`], [`spec`]): Linux interfaces through AF_PACKET raw sockets, TUN and TAP
//! devices the switch creates, and pcap files (frames read from one, frames sent written to
//! another); each kind is a type of its own in [`port`]. Every port's traffic can also be captured
//! to pcap files (`--pcap-dir`). The packet loop is in [`datapath`], start-up in
//! [`start`](mod@start), signals in [`signal`]. `p4sec switch` as a whole (its options, its
//! control plane's server, the wait until it ends) is [`SwitchOptions::run`] in [`runner`].
//!
//! This file only declares the modules and re-exports what other crates use; no module refers back
//! to it.

#[macro_use]
pub mod log;

pub mod alloc;
pub mod bmv2log;
pub mod control;
pub mod control_plane;
pub mod datapath;
pub mod dl;
pub mod gro;
pub mod gso;
pub mod metrics;
pub mod options;
pub mod pcap_file;
pub mod port;
pub mod ring;
pub mod runner;
pub mod signal;
pub mod spec;
pub mod start;
pub mod tm;
pub mod tuntap;

pub use datapath::{run, run_with, WorkerStats, BUSY_POLL_ENV};
pub use gro::{NO_GRO_ENV, UDP_GRO_ENV};
pub use gso::complete_l4_checksum;
pub use options::{QueueOptions, SwitchOptions};
pub use port::afpacket::NO_MMAP_ENV;
pub use port::io::PortStats;
pub use port::Port;
pub use ring::RX_RING_ENV;
pub use runner::RunError;
pub use signal::{install_signal_handlers, signalled};
pub use spec::{capture_files, capture_paths, check_ports, CaptureNames, PortKind, PortSpec};
pub use start::{run_workers, start, Config, Switch};
pub use tuntap::{ethernet_to_ip, ip_to_ethernet, tun_host_mac, TUN_SWITCH_MAC};
