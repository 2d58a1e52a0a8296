//! Who calls: the client of one gRPC call as the authorization sees it (its access and certificate),
//! the decision for a call, and the refusals naming what the client may do.

use crate::authz::{Access, Identity, Policy, Revoked};
use tonic::{Request, Status};

/// The client of one call, as the authorization sees it.
pub(crate) struct Caller {
    pub(crate) access: Access,
    /// Its certificate (under mutual TLS with a policy).
    pub(crate) identity: Option<Identity>,
}

/// The client's address for messages and the log.
pub(crate) fn peer_of<T>(req: &Request<T>) -> String {
    req.remote_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|| "a client".into())
}

/// The refusal of a call `what` a client with `c`'s access may not make (logged).
pub(crate) fn refuse(c: &Caller, peer: &str, what: &str) -> Status {
    let who = c
        .identity
        .as_ref()
        .map(|i| i.describe())
        .unwrap_or_else(|| "no certificate".into());
    rtlog!(
        crate::log::Level::Info,
        "P4Runtime: {peer} ({who}): {what} refused: {}",
        match c.access {
            Access::Read => "a reader may not write or arbitrate",
            _ => "not among the switch's --tls-writers or --tls-readers",
        }
    );
    Status::permission_denied(match c.access {
        Access::Read => {
            format!("{who} may only read this switch ({what} needs an identity in --tls-writers)")
        }
        _ => format!("{who} is not allowed to use this switch"),
    })
}

/// The authorization decision for one call: `policy` None lets everything through; otherwise the
/// leaf client certificate `cert` (DER) must be there (UNAUTHENTICATED), not `revoked`
/// (UNAUTHENTICATED; UNAVAILABLE while the list is unusable) and named by the policy
/// (PERMISSION_DENIED); what it may do is in the answer.
pub(crate) fn caller_of(
    policy: Option<&Policy>,
    revoked: Option<&Revoked>,
    cert: Option<&[u8]>,
    peer: &str,
    what: &str,
) -> Result<Caller, Status> {
    let Some(policy) = policy else {
        return Ok(Caller {
            access: Access::Write,
            identity: None,
        });
    };
    let Some(der) = cert else {
        rtlog!(
            crate::log::Level::Info,
            "P4Runtime: {peer}: {what} refused: no client certificate"
        );
        return Err(Status::unauthenticated(
            "this switch serves clients with a certificate from its CA only",
        ));
    };
    let identity = Identity::from_der(der).map_err(Status::unauthenticated)?;
    if let Some(Err((is_revoked, why))) = revoked.map(|r| r.check(&identity.serial)) {
        rtlog!(
            crate::log::Level::Info,
            "P4Runtime: {peer} ({}): {what} refused: {why}",
            identity.describe()
        );
        return Err(if is_revoked {
            Status::unauthenticated(why)
        } else {
            // fail closed: while the list cannot be read, nobody is admitted
            Status::unavailable(format!("the switch admits nobody now: {why}"))
        });
    }
    let c = Caller {
        access: policy.access(&identity),
        identity: Some(identity),
    };
    if c.access == Access::Denied {
        return Err(refuse(&c, peer, what));
    }
    Ok(c)
}
