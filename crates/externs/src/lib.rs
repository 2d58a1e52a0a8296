//! p4sec security externs: ESP cipher suites with SA state and anti-replay, ASCON-AEAD, hash family.
pub mod iface;
