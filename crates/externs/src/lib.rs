//! p4sec security externs: ESP cipher suites with SA state and anti-replay, ASCON-AEAD, and the
//! hash family, behind one extern interface ([`iface`]) that the engine calls. This crate does not
//! depend on the engine.
pub mod ascon;
pub mod checksum;
pub mod esp;
pub mod hash;
pub mod iface;
pub mod layout;
pub mod p4;
