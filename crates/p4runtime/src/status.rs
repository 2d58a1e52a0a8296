//! The engine's table and action profile errors as gRPC statuses (the P4Runtime canonical codes),
//! their messages unchanged.

use p4sec_engine::tables::{TableError, TableErrorKind};
use tonic::Status;

pub(crate) fn status(e: TableError) -> Status {
    match e.kind {
        TableErrorKind::NotFound => Status::not_found(e.message),
        TableErrorKind::AlreadyExists => Status::already_exists(e.message),
        TableErrorKind::Precondition => Status::failed_precondition(e.message),
        TableErrorKind::Invalid => Status::invalid_argument(e.message),
        TableErrorKind::Full => Status::resource_exhausted(e.message),
        TableErrorKind::Internal => Status::internal(e.message),
    }
}
