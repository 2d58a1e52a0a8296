//! Where the P4Runtime server listens: `HOST:PORT` resolved (host names too), the socket bound and
//! the TLS files read and checked before the switch says it listens, each failure one message naming
//! the cause and the flag to change. [`crate::server::serve_on`] serves on the result.

use crate::authz::{Policy, Revoked};
use std::sync::Arc;

/// PEM files for TLS: the server's certificate and key, and optionally a CA whose certificates
/// clients must present (mutual TLS).
pub struct TlsFiles {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
    pub client_ca: Option<std::path::PathBuf>,
    /// Who may write and read (required with `client_ca`).
    pub authz: Option<Policy>,
    /// The revocation list of the client CA (`p4sec-ca`'s revoked.json), read again when it changes.
    pub revoked: Option<std::path::PathBuf>,
}

/// The gRPC server's socket, bound, and its TLS settings, read and checked: what can go wrong at
/// start (an address in use or not allowed, an unreadable or malformed certificate) is found by
/// [`listen`] before the switch says it listens.
pub struct Listener {
    pub(crate) socket: std::net::TcpListener,
    pub(crate) builder: tonic::transport::Server,
    /// Who may program the switch and who may only read (mutual TLS).
    pub(crate) authz: Option<Arc<Policy>>,
    /// The client CA's revocation list, read again when it changes.
    pub(crate) revoked: Option<Arc<Revoked>>,
}

impl Listener {
    /// The address bound (with the port the system chose for port 0).
    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.socket
            .local_addr()
            .expect("a bound socket has an address")
    }
}

/// `ADDR` given as `HOST:PORT` (a name such as `localhost` or an IP address; IPv6 in brackets) to
/// the address it stands for (the first the system's resolver gives). `flag` names the option in
/// the error.
pub fn resolve(addr: &str, flag: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let expected = "HOST:PORT, e.g. 0.0.0.0:9559, localhost:9559 or [::1]:9559";
    let Some((host, port)) = addr.rsplit_once(':') else {
        return Err(format!("{flag} takes {expected}, got `{addr}` (no port)"));
    };
    if port.parse::<u16>().is_err() {
        return Err(format!(
            "{flag} takes {expected}, got `{addr}` (`{port}` is not a port number 0..65535)"
        ));
    }
    if host.is_empty() {
        return Err(format!("{flag} takes {expected}, got `{addr}` (no host)"));
    }
    match addr.to_socket_addrs() {
        Ok(mut a) => a
            .next()
            .ok_or_else(|| format!("{flag} {addr}: `{host}` has no address")),
        Err(e) => Err(format!("{flag} {addr}: cannot resolve `{host}`: {e}")),
    }
}

/// The whole chain of an error's causes, `outer: inner: ...` (tonic's own Display says only
/// "transport error").
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

/// Binds the P4Runtime server's address (`flag` names the option that gave it, for the error)
/// and reads its TLS files. Each error says what went wrong and what to change.
pub fn listen(addr: &str, flag: &str, tls: Option<TlsFiles>) -> Result<Listener, String> {
    let at = resolve(addr, flag)?;
    let (authz, revoked) = access(tls.as_ref())?;
    let mut builder = tonic::transport::Server::builder();
    if let Some(t) = tls {
        let read = |p: &std::path::Path, what: &str, marker: &str| {
            let b = std::fs::read(p)
                .map_err(|e| format!("TLS: cannot read the {what} {}: {e}", p.display()))?;
            if !String::from_utf8_lossy(&b).contains(marker) {
                return Err(format!(
                    "TLS: {} is not a PEM {what} (no `{marker}` line)",
                    p.display()
                ));
            }
            Ok(b)
        };
        let cert = read(
            &t.cert,
            "certificate (--tls-cert)",
            "-----BEGIN CERTIFICATE-----",
        )?;
        let key = read(&t.key, "private key (--tls-key)", "PRIVATE KEY-----")?;
        let mut cfg = tonic::transport::ServerTlsConfig::new()
            .identity(tonic::transport::Identity::from_pem(cert, key));
        if let Some(ca) = &t.client_ca {
            let ca = read(
                ca,
                "CA certificate (--tls-ca)",
                "-----BEGIN CERTIFICATE-----",
            )?;
            cfg = cfg.client_ca_root(tonic::transport::Certificate::from_pem(ca));
        }
        builder = builder.tls_config(cfg).map_err(|e| {
            format!(
                "TLS: the certificate (--tls-cert) and key (--tls-key) cannot be used: {}",
                chain(&e)
            )
        })?;
    }
    let socket = std::net::TcpListener::bind(at).map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::AddrInUse => {
                "is in use (another switch or P4Runtime server?): give a free one with --grpc ADDR"
                    .to_string()
            }
            std::io::ErrorKind::PermissionDenied => {
                "is not allowed to this user (ports below 1024 need root): give another with \
                 --grpc ADDR"
                    .to_string()
            }
            std::io::ErrorKind::AddrNotAvailable => {
                "is not an address of this machine: give one of its addresses (or 0.0.0.0) with \
                 --grpc ADDR"
                    .to_string()
            }
            _ => format!("cannot be bound ({e}): give another with --grpc ADDR"),
        };
        let why = why.replace("--grpc", flag);
        format!("the P4Runtime address {at} ({flag} {addr}) {why}")
    })?;
    socket
        .set_nonblocking(true)
        .map_err(|e| format!("{flag} {addr}: {e}"))?;
    Ok(Listener {
        socket,
        builder,
        authz,
        revoked,
    })
}

/// The authorization policy and the revocation list of `tls`, checked: mutual TLS needs a policy
/// (who may write), and a policy or a revocation list needs mutual TLS (client identities).
fn access(tls: Option<&TlsFiles>) -> Result<(Option<Arc<Policy>>, Option<Arc<Revoked>>), String> {
    let Some(t) = tls else {
        return Ok((None, None));
    };
    let authz = match (&t.client_ca, &t.authz) {
        (Some(_), Some(p)) => Some(Arc::new(p.clone())),
        (Some(_), None) => {
            return Err(
                "mutual TLS (--tls-ca) needs an authorization policy (--tls-writers)".into(),
            )
        }
        (None, Some(_)) => {
            return Err(
                "--tls-writers/--tls-readers need --tls-ca (clients without \
                        certificates have no identity)"
                    .into(),
            )
        }
        (None, None) if t.revoked.is_some() => {
            return Err(
                "--tls-revoked needs --tls-ca (clients without certificates have no \
                        identity)"
                    .into(),
            )
        }
        (None, None) => None,
    };
    if let Some(p) = &authz {
        crate::rtlog!(
            crate::log::Level::Info,
            "P4Runtime: mutual TLS: may program the switch: {}; may only read: {}",
            p.writers,
            p.readers
        );
    }
    let revoked = match &t.revoked {
        Some(p) => Some(Arc::new(
            Revoked::load(p).map_err(|e| format!("--tls-revoked: {e}"))?,
        )),
        None => None,
    };
    Ok((authz, revoked))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_takes_names_and_names_what_is_wrong() {
        assert_eq!(resolve("127.0.0.1:9559", "--grpc").unwrap().port(), 9559);
        assert!(resolve("localhost:9559", "--grpc")
            .unwrap()
            .ip()
            .is_loopback());
        assert!(resolve("[::1]:9559", "--grpc").unwrap().is_ipv6());
        for (bad, why) in [
            ("9559", "no port"),
            ("localhost:http", "not a port number"),
            (":9559", "no host"),
        ] {
            let e = resolve(bad, "--grpc").unwrap_err();
            assert!(
                e.starts_with("--grpc takes HOST:PORT") && e.contains(why),
                "{e}"
            );
        }
    }

    #[test]
    fn an_address_in_use_names_the_flag() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = held.local_addr().unwrap().to_string();
        let e = listen(&at, "--grpc-server-addr", None).err().unwrap();
        assert!(
            e.contains("is in use") && e.contains("--grpc-server-addr ADDR") && e.contains(&at),
            "{e}"
        );
        let l = listen("localhost:0", "--grpc", None).unwrap();
        assert!(l.local_addr().ip().is_loopback() && l.local_addr().port() != 0);
    }
}
