//! Who may use the P4Runtime server under mutual TLS: the identities of client certificates (the
//! subject's common name and the DNS and URI subject alternative names) checked against the
//! switch's `--tls-writers` and `--tls-readers` lists. A writer may arbitrate as primary, write and
//! set the pipeline (and read); a reader may only read (Read, GetForwardingPipelineConfig,
//! Capabilities); any other certificate is refused every call. With `--tls-revoked FILE` (the
//! revocation list `p4sec-ca revoke` keeps: a JSON list of serials) a revoked certificate is
//! refused from its next call on, and an unreadable list refuses everyone (fail closed).

use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer;

/// A list of certificate identities, or every certificate the client CA signed (`*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Names {
    Any,
    Only(Vec<String>),
}

impl Names {
    /// Parse the values of a repeatable comma-separated flag (`--tls-writers a,b --tls-writers c`);
    /// `*` alone means any certificate. `flag` names the flag in errors.
    pub fn parse(flag: &str, values: &[String]) -> Result<Names, String> {
        let mut names = vec![];
        for v in values {
            for n in v.split(',') {
                let n = n.trim();
                if n.is_empty() {
                    return Err(format!(
                        "{flag}: empty name in `{v}` (expected NAME[,NAME...] or `*`)"
                    ));
                }
                if n.chars().any(|c| c.is_control()) {
                    return Err(format!(
                        "{flag}: {n:?} is not a certificate name (it holds a control character)"
                    ));
                }
                names.push(n.to_string());
            }
        }
        if names.iter().any(|n| n == "*") {
            if names.len() > 1 {
                return Err(format!(
                    "{flag}: `*` (any certificate the CA signed) cannot be combined with names"
                ));
            }
            return Ok(Names::Any);
        }
        Ok(Names::Only(names))
    }

    fn admits(&self, id: &Identity) -> bool {
        match self {
            Names::Any => true,
            Names::Only(list) => id.names.iter().any(|n| list.contains(n)),
        }
    }

    fn is_empty(&self) -> bool {
        matches!(self, Names::Only(l) if l.is_empty())
    }
}

impl std::fmt::Display for Names {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Names::Any => write!(f, "any certificate the CA signed"),
            Names::Only(l) if l.is_empty() => write!(f, "nobody"),
            Names::Only(l) => write!(f, "{}", l.join(", ")),
        }
    }
}

/// What a client may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Arbitrate (primary or backup), Write, SetForwardingPipelineConfig, and everything a reader
    /// may.
    Write,
    /// Read, GetForwardingPipelineConfig, Capabilities.
    Read,
    /// Nothing.
    Denied,
}

/// The switch's authorization policy (given with `--tls-ca`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub writers: Names,
    pub readers: Names,
}

impl Policy {
    /// The policy from the flags' values; at least one writer is required (a switch nobody may
    /// program is a configuration mistake).
    pub fn new(writers: &[String], readers: &[String]) -> Result<Policy, String> {
        let writers = Names::parse("--tls-writers", writers)?;
        let readers = Names::parse("--tls-readers", readers)?;
        if writers.is_empty() {
            return Err(
                "--tls-ca needs --tls-writers NAME[,NAME...]: the certificate names \
                        allowed to program this switch (the controller's), or `*` for any \
                        certificate the CA signed"
                    .into(),
            );
        }
        Ok(Policy { writers, readers })
    }

    /// What a client with this certificate identity may do.
    pub fn access(&self, id: &Identity) -> Access {
        if self.writers.admits(id) {
            Access::Write
        } else if self.readers.admits(id) {
            Access::Read
        } else {
            Access::Denied
        }
    }
}

/// A client certificate's identity: its names, and its DER bytes (a primary controller's later
/// calls must come with the very certificate its stream arbitrated with).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The subject's common names, then the DNS and URI subject alternative names.
    pub names: Vec<String>,
    pub der: Vec<u8>,
    /// The serial number, in decimal (as `p4sec-ca` lists revoked ones).
    pub serial: String,
}

impl Identity {
    /// The identity of a DER certificate (the TLS layer verified it against the client CA).
    pub fn from_der(der: &[u8]) -> Result<Identity, String> {
        let (_, cert) = X509Certificate::from_der(der)
            .map_err(|e| format!("the client certificate cannot be parsed: {e}"))?;
        let mut names = vec![];
        for cn in cert.subject().iter_common_name() {
            if let Ok(s) = cn.as_str() {
                names.push(s.to_string());
            }
        }
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for g in &san.value.general_names {
                match g {
                    GeneralName::DNSName(s) | GeneralName::URI(s) => names.push(s.to_string()),
                    _ => {}
                }
            }
        }
        names.dedup();
        Ok(Identity {
            names,
            der: der.to_vec(),
            serial: cert.tbs_certificate.serial.to_string(),
        })
    }

    /// The names for messages and the log ("a certificate without names" if it has none).
    pub fn describe(&self) -> String {
        if self.names.is_empty() {
            "a certificate without names".into()
        } else {
            format!("certificate {}", self.names.join("/"))
        }
    }
}

/// The serials of revoked client certificates, read from a JSON list (integers or decimal
/// strings, as `p4sec-ca revoke` writes it) and read again whenever the file changes.
pub struct Revoked {
    path: std::path::PathBuf,
    /// (the file's modification time and length when read, the serials or why the list is unusable)
    state: std::sync::Mutex<(
        Option<(std::time::SystemTime, u64)>,
        Result<Vec<String>, String>,
    )>,
}

/// The serials of a revocation list's text.
pub fn parse_revoked(text: &str) -> Result<Vec<String>, String> {
    let v: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| format!("not JSON (truncated? an empty list is written []): {e}"))?;
    let items = v
        .as_array()
        .ok_or_else(|| format!("a JSON {}, not a list of serials", json_kind(&v)))?;
    items
        .iter()
        .map(|x| match x {
            serde_json::Value::Number(n) if n.is_u64() => Ok(n.to_string()),
            serde_json::Value::String(s)
                if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) =>
            {
                Ok(s.trim_start_matches('0').to_string()).map(|t| {
                    if t.is_empty() {
                        "0".into()
                    } else {
                        t
                    }
                })
            }
            other => Err(format!("{other} is not a certificate serial")),
        })
        .collect()
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Object(_) => "object",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Null => "null",
        serde_json::Value::Array(_) => "list",
    }
}

impl Revoked {
    /// The list at `path`; an error if it cannot be read now (a switch does not start with it).
    pub fn load(path: &std::path::Path) -> Result<Revoked, String> {
        let r = Revoked {
            path: path.to_path_buf(),
            state: std::sync::Mutex::new((None, Err(String::new()))),
        };
        r.refresh();
        let st = r.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = &st.1 {
            return Err(e.clone());
        }
        drop(st);
        Ok(r)
    }

    /// Read the list again if the file changed (its modification time or length).
    fn refresh(&self) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let stamp = std::fs::metadata(&self.path)
            .and_then(|m| Ok((m.modified()?, m.len())))
            .ok();
        if stamp.is_some() && stamp == st.0 {
            return;
        }
        let where_ = self.path.display();
        st.1 = match std::fs::read_to_string(&self.path) {
            Ok(text) => parse_revoked(&text).map_err(|e| format!("revocation list {where_}: {e}")),
            Err(e) => Err(format!("revocation list {where_} cannot be read: {e}")),
        };
        st.0 = stamp;
    }

    /// Ok if the certificate with this serial is not revoked; Err(true, why) if it is, Err(false,
    /// why) if the list is unusable (nobody is admitted then).
    pub fn check(&self, serial: &str) -> Result<(), (bool, String)> {
        self.refresh();
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match &st.1 {
            Ok(list) if list.iter().any(|s| s == serial) => {
                Err((true, format!("certificate serial {serial} is revoked")))
            }
            Ok(_) => Ok(()),
            Err(e) => Err((false, e.clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(names: &[&str]) -> Identity {
        Identity {
            names: names.iter().map(|s| s.to_string()).collect(),
            der: names.join(",").into_bytes(),
            serial: "1".into(),
        }
    }
    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn writers_readers_and_strangers() {
        let p = Policy::new(&v(&["controller"]), &v(&["monitor,audit"])).unwrap();
        assert_eq!(p.access(&id(&["controller"])), Access::Write);
        assert_eq!(p.access(&id(&["monitor"])), Access::Read);
        assert_eq!(p.access(&id(&["audit"])), Access::Read);
        assert_eq!(p.access(&id(&["alice"])), Access::Denied);
        assert_eq!(p.access(&id(&[])), Access::Denied);
        // a SAN naming the controller is the controller; a name is matched whole, not as a prefix
        assert_eq!(p.access(&id(&["x", "controller"])), Access::Write);
        assert_eq!(p.access(&id(&["controller2"])), Access::Denied);
        assert_eq!(p.access(&id(&["Controller"])), Access::Denied);
        // no readers: only writers get in
        let p = Policy::new(&v(&["a", "b"]), &[]).unwrap();
        assert_eq!(p.access(&id(&["b"])), Access::Write);
        assert_eq!(p.access(&id(&["monitor"])), Access::Denied);
        // `*` readers: every certificate may read, only the writers write
        let p = Policy::new(&v(&["controller"]), &v(&["*"])).unwrap();
        assert_eq!(p.access(&id(&["anyone"])), Access::Read);
        assert_eq!(p.access(&id(&["controller"])), Access::Write);
        let p = Policy::new(&v(&["*"]), &[]).unwrap();
        assert_eq!(p.access(&id(&["anyone"])), Access::Write);
    }

    #[test]
    fn bad_lists_are_refused_with_the_flag() {
        let e = Policy::new(&[], &v(&["monitor"])).unwrap_err();
        assert!(e.contains("--tls-writers"), "{e}");
        let e = Policy::new(&v(&["a,,b"]), &[]).unwrap_err();
        assert!(e.contains("--tls-writers: empty name"), "{e}");
        let e = Policy::new(&v(&["a"]), &v(&["*,b"])).unwrap_err();
        assert!(e.contains("--tls-readers") && e.contains("`*`"), "{e}");
        let e = Policy::new(&v(&["a\tb"]), &[]).unwrap_err();
        assert!(e.contains("control character"), "{e}");
        // a common name may hold spaces; the spaces around a list's names are not part of them
        let p = Policy::new(&v(&[" p4sec ops , b"]), &[]).unwrap();
        assert_eq!(p.writers, Names::Only(v(&["p4sec ops", "b"])));
    }

    /// A certificate (made with Python's `cryptography`: O=p4sec tests, CN=controller, SANs DNS
    /// ctl.example, URI spiffe://p4sec/controller, IP 192.0.2.5) is named by its CN, DNS and URI
    /// names; not by its organization or IP address.
    #[test]
    fn names_of_a_real_certificate() {
        let der = include_bytes!("../tests/data/client-cert.der");
        let id = Identity::from_der(der).unwrap();
        assert_eq!(
            id.names,
            ["controller", "ctl.example", "spiffe://p4sec/controller"]
        );
        assert_eq!(id.der, der.to_vec());
        assert_eq!(id.serial, "1");
        let p = Policy::new(&v(&["spiffe://p4sec/controller"]), &v(&["p4sec tests"])).unwrap();
        assert_eq!(p.access(&id), Access::Write);
        let p = Policy::new(&v(&["ctl.example"]), &[]).unwrap();
        assert_eq!(p.access(&id), Access::Write);
        let p = Policy::new(&v(&["nobody"]), &v(&["p4sec tests", "192.0.2.5"])).unwrap();
        assert_eq!(p.access(&id), Access::Denied);
    }

    #[test]
    fn revocation_lists_as_p4sec_ca_writes_them() {
        assert_eq!(
            parse_revoked(r#"["123", 45, "0077", "340282366920938463463374607431768211455"]"#)
                .unwrap(),
            ["123", "45", "77", "340282366920938463463374607431768211455"]
        );
        assert_eq!(parse_revoked("[]").unwrap(), Vec::<String>::new());
        for (bad, why) in [
            ("", "not JSON"),
            ("[\"12", "not JSON"),
            ("{}", "a JSON object"),
            ("[-1]", "-1 is not a certificate serial"),
            ("[\"12a\"]", "\"12a\" is not a certificate serial"),
            ("[true]", "true is not"),
        ] {
            let e = parse_revoked(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let dir = std::env::temp_dir().join(format!("p4sec-revoked-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("revoked.json");
        assert!(Revoked::load(&f).err().unwrap().contains("cannot be read"));
        std::fs::write(&f, "[\"5\"]").unwrap();
        let r = Revoked::load(&f).unwrap();
        assert!(r.check("4").is_ok());
        assert!(r.check("5").unwrap_err().0);
        // a list that breaks later refuses everyone until it is fixed (a longer file: seen as changed)
        std::fs::write(&f, "[\"5\", ").unwrap();
        let (revoked, why) = r.check("4").unwrap_err();
        assert!(!revoked && why.contains("not JSON"), "{why}");
        std::fs::write(&f, "[\"5\", \"4\"]").unwrap();
        assert!(r.check("4").unwrap_err().0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_garbage_certificate_is_an_error() {
        assert!(Identity::from_der(b"not a certificate")
            .unwrap_err()
            .contains("cannot be parsed"));
    }
}
