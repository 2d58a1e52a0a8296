//! The Write response: OK, or UNKNOWN with one `p4.v1.Error` per update in its details as the
//! specification prescribes (capped for large batches).

use crate::proto::google::rpc;
use crate::proto::p4::v1 as p4;
use prost::Message;
use tonic::{Code, Status};

fn p4error(s: &Status) -> p4::Error {
    p4::Error {
        canonical_code: s.code() as i32,
        message: s.message().to_string(),
        space: String::new(),
        code: 0,
        details: None,
    }
}

/// Batches up to this size get one `p4.v1.Error` per update in the Write error's details.
const POSITIONAL_DETAILS_MAX: usize = 100;
/// Larger batches get the errors of their first this many failed updates only (each naming its
/// update).
const FAILED_DETAILS_MAX: usize = 50;

/// The Write response: OK, or UNKNOWN with its details as the specification prescribes: one
/// `p4.v1.Error` per update (OK for those that succeeded). For a batch of more than
/// [`POSITIONAL_DETAILS_MAX`] updates that would not fit gRPC's metadata limits, so the details are
/// the first [`FAILED_DETAILS_MAX`] failures, each message starting with its update's index, and
/// the status message counts them all.
pub(crate) fn write_response(
    results: Vec<Option<Result<(), Status>>>,
) -> Result<p4::WriteResponse, Status> {
    let n = results.len();
    let results: Vec<Result<(), Status>> = results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Status::internal("update not applied"))))
        .collect();
    let failed = results.iter().filter(|r| r.is_err()).count();
    if failed == 0 {
        return Ok(p4::WriteResponse {});
    }
    let (errors, message): (Vec<p4::Error>, String) = if n <= POSITIONAL_DETAILS_MAX {
        let errors = results
            .iter()
            .map(|r| match r {
                Ok(()) => p4::Error {
                    canonical_code: Code::Ok as i32,
                    ..Default::default()
                },
                Err(s) => p4error(s),
            })
            .collect();
        (errors, "one or more updates failed".into())
    } else {
        let errors = results
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.as_ref().err().map(|s| (i, s)))
            .take(FAILED_DETAILS_MAX)
            .map(|(i, s)| p4::Error {
                message: format!("update {i}: {}", s.message()),
                ..p4error(s)
            })
            .collect();
        let shown = failed.min(FAILED_DETAILS_MAX);
        (errors, format!("{failed} of {n} updates failed; the details hold the first {shown} failures, each naming its update's index"))
    };
    let details = errors
        .into_iter()
        .map(|e| prost_types::Any {
            type_url: "type.googleapis.com/p4.v1.Error".into(),
            value: e.encode_to_vec(),
        })
        .collect();
    let st = rpc::Status {
        code: Code::Unknown as i32,
        message: message.clone(),
        details,
    };
    Err(Status::with_details(
        Code::Unknown,
        message,
        st.encode_to_vec().into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn details(s: &Status) -> rpc::Status {
        rpc::Status::decode(s.details()).unwrap()
    }

    /// Small batches: one error per update; large ones: the first failures only, named by index,
    /// and a count, so that a batch of 60,000 updates with failures still gets an answer a client
    /// can read.
    #[test]
    fn write_error_details_are_capped() {
        let small: Vec<_> = (0..3)
            .map(|i| {
                Some(if i == 1 {
                    Err(Status::not_found("x"))
                } else {
                    Ok(())
                })
            })
            .collect();
        let st = details(&write_response(small).unwrap_err());
        assert_eq!(st.details.len(), 3);
        let e1 = p4::Error::decode(&st.details[1].value[..]).unwrap();
        assert_eq!(
            (e1.canonical_code, e1.message.as_str()),
            (Code::NotFound as i32, "x")
        );
        let big: Vec<_> = (0..60_000)
            .map(|i| {
                Some(if i % 2 == 1 {
                    Err(Status::invalid_argument("bad"))
                } else {
                    Ok(())
                })
            })
            .collect();
        let s = write_response(big).unwrap_err();
        let st = details(&s);
        assert_eq!(st.details.len(), FAILED_DETAILS_MAX);
        assert!(
            s.message().starts_with("30000 of 60000 updates failed"),
            "{}",
            s.message()
        );
        let e0 = p4::Error::decode(&st.details[0].value[..]).unwrap();
        assert_eq!(e0.message, "update 1: bad");
        assert!(
            s.details().len() < 8192,
            "the details fit gRPC's default metadata limit: {} bytes",
            s.details().len()
        );
    }
}
