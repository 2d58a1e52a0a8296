//! P4Runtime for p4sec.
pub mod proto {
    pub mod p4 {
        pub mod v1 {
            tonic::include_proto!("p4.v1");
        }
        pub mod config {
            pub mod v1 {
                tonic::include_proto!("p4.config.v1");
            }
        }
    }
    pub mod google {
        pub mod rpc {
            tonic::include_proto!("google.rpc");
        }
    }
}

mod entities;
#[macro_use]
pub mod log;
pub mod json;
pub mod p4info;
mod profiles;
pub mod server;

/// Re-exported so users of the messages need not depend on prost themselves.
pub mod prost_message {
    pub use prost::Message;
}
