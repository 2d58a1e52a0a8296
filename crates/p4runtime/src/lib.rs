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
mod action_profiles;
mod arbitration;
pub mod authz;
mod callers;
mod codec;
pub mod controller;
mod descriptors;
pub mod device;
mod digest_cache;
mod digests;
mod direct_entities;
mod entry_updates;
pub mod grpc_codec;
mod idle_timeouts;
mod indexed_entities;
pub mod json;
pub mod listen;
pub mod p4config;
pub mod p4info;
mod packet_io;
mod pipeline_config;
mod read;
mod reconcile;
mod replication;
pub mod server;
mod status;
mod stream_channel;
mod table_action;
pub mod text;
pub mod translate;
mod value_sets;
mod write;
mod write_response;

pub use device::{Device, Pipeline};

/// Re-exported so users of the messages need not depend on prost themselves.
pub mod prost_message {
    pub use prost::Message;
}
