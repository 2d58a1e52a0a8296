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

#[macro_use]
pub mod log;
pub mod authz;
mod codec;
mod descriptors;
pub mod device;
mod entities;
pub mod grpc_codec;
pub mod json;
pub mod listen;
pub mod p4config;
pub mod p4info;
mod profiles;
mod read;
mod reconcile;
pub mod server;
pub mod text;
pub mod translate;
mod write;

pub use device::{Device, Pipeline};

/// Re-exported so users of the messages need not depend on prost themselves.
pub mod prost_message {
    pub use prost::Message;
}
