//! Port specifications: what a `--port N=...` argument names (an interface, a TAP or TUN device,
//! pcap files), its parsing with precise errors, and the checks of a whole port list (numbers,
//! names, files written).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What a `--port` argument names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortKind {
    /// A Linux interface, opened through an AF_PACKET socket.
    Iface(String),
    /// A Linux interface, opened through an AF_XDP socket (`xdp:IFACE`); where AF_XDP cannot work,
    /// through an AF_PACKET socket, with the reason logged.
    Xdp(String),
    /// A TAP device the switch creates: Ethernet frames.
    Tap(String),
    /// A TUN device the switch creates: IP packets, given a synthetic Ethernet header on the way in
    /// and stripped of it on the way out.
    Tun(String),
    /// pcap files: frames read from `input` enter on the port, frames sent to it are written to
    /// `output`.
    Pcap {
        input: Option<PathBuf>,
        output: Option<PathBuf>,
    },
}

/// One `--port N=...` argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortSpec {
    pub number: u32,
    pub kind: PortKind,
    /// What followed `N=`: the port's name in messages and metrics.
    pub label: String,
}

fn check_ifname(name: &str, what: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("{what}: the interface name is empty"));
    }
    if name.len() >= libc::IFNAMSIZ {
        return Err(format!(
            "{what}: interface name `{name}` is too long (at most {} bytes)",
            libc::IFNAMSIZ - 1
        ));
    }
    if name == "."
        || name == ".."
        || name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
    {
        return Err(format!("{what}: `{name}` is not a valid interface name"));
    }
    Ok(())
}

impl PortSpec {
    /// Parse `N=IFACE`, `N=xdp:IFACE`, `N=tap:NAME`, `N=tun:NAME` or `N=pcap:in=FILE,out=FILE`
    /// (either part optional).
    pub fn parse(spec: &str) -> Result<PortSpec, String> {
        let usage = "NUMBER=INTERFACE, NUMBER=xdp:INTERFACE, NUMBER=tap:NAME, NUMBER=tun:NAME or NUMBER=pcap:in=FILE,out=FILE";
        let Some((n, rest)) = spec.split_once('=') else {
            return Err(format!("--port needs {usage}, got `{spec}`"));
        };
        let number = n
            .trim()
            .parse::<u32>()
            .map_err(|_| format!("bad port number `{n}` in `--port {spec}`"))?;
        let what = format!("port {number}");
        let kind = match rest.split_once(':') {
            None => {
                check_ifname(rest, &what)?;
                PortKind::Iface(rest.to_string())
            }
            Some(("xdp", name)) => {
                check_ifname(name, &what)?;
                PortKind::Xdp(name.to_string())
            }
            Some(("tap", name)) => {
                check_ifname(name, &what)?;
                PortKind::Tap(name.to_string())
            }
            Some(("tun", name)) => {
                check_ifname(name, &what)?;
                PortKind::Tun(name.to_string())
            }
            Some(("pcap", args)) => {
                // FILE may hold commas: a new part starts only at `,KEY=` (KEY made of letters and
                // `_`)
                let starts_part =
                    |p: &str| p.split_once('=').map(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphabetic() || c == '_')).unwrap_or(false);
                let mut parts: Vec<String> = vec![];
                for piece in args.split(',') {
                    match parts.last_mut() {
                        Some(last) if !starts_part(piece) => {
                            last.push(',');
                            last.push_str(piece);
                        }
                        _ => parts.push(piece.to_string()),
                    }
                }
                let (mut input, mut output) = (None, None);
                for part in parts.iter().filter(|p| !p.is_empty()) {
                    let (key, file) = part.split_once('=').unwrap_or((part.as_str(), ""));
                    let slot = match key {
                        "in" => &mut input,
                        "out" => &mut output,
                        _ => return Err(format!("{what}: unknown pcap option `{part}` (in=FILE and out=FILE are known)")),
                    };
                    if file.is_empty() {
                        return Err(format!("{what}: `{key}=` needs a file name"));
                    }
                    if slot.is_some() {
                        return Err(format!("{what}: `{key}=` is given twice"));
                    }
                    *slot = Some(PathBuf::from(file));
                }
                if input.is_none() && output.is_none() {
                    return Err(format!("{what}: a pcap port needs in=FILE, out=FILE or both (pcap:in=FILE,out=FILE)"));
                }
                PortKind::Pcap { input, output }
            }
            Some((k, _)) => {
                return Err(format!(
                    "{what}: unknown port kind `{k}` in `{rest}` (expected an interface name, xdp:INTERFACE, tap:NAME, tun:NAME or pcap:in=FILE,out=FILE)"
                ))
            }
        };
        Ok(PortSpec {
            number,
            kind,
            label: rest.to_string(),
        })
    }

    /// A port that can receive frames at any time (an interface, TUN or TAP), as opposed to a pcap
    /// port.
    pub fn is_live(&self) -> bool {
        !matches!(self.kind, PortKind::Pcap { .. })
    }
}

/// A path to compare files by: canonical where the file (or its folder) exists.
fn file_key(p: &Path) -> PathBuf {
    if let Ok(c) = p.canonicalize() {
        return c;
    }
    let parent = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match (parent.canonicalize(), p.file_name()) {
        (Ok(d), Some(f)) => d.join(f),
        _ => p.to_path_buf(),
    }
}

/// The capture files of port `n` under `--pcap-dir`.
pub fn capture_paths(dir: &Path, n: u32) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("port{n}-in.pcap")),
        dir.join(format!("port{n}-out.pcap")),
    )
}

/// How the capture files of the ports are named.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CaptureNames {
    /// p4sec's `--pcap-dir`: `port<N>-in.pcap`, `port<N>-out.pcap`.
    #[default]
    PortNumber,
    /// BMv2's `--pcap`: after the interface, `<IFACE>_in.pcap`, `<IFACE>_out.pcap` (so switches
    /// sharing a directory do not overwrite each other); a pcap-file port is `port<N>`.
    Interface,
}

/// The capture files of port `s` in `dir`, named as `names` says.
pub fn capture_files(dir: &Path, s: &PortSpec, names: CaptureNames) -> (PathBuf, PathBuf) {
    match (names, &s.kind) {
        (CaptureNames::PortNumber, _) => capture_paths(dir, s.number),
        (
            CaptureNames::Interface,
            PortKind::Iface(n) | PortKind::Xdp(n) | PortKind::Tap(n) | PortKind::Tun(n),
        ) => (
            dir.join(format!("{n}_in.pcap")),
            dir.join(format!("{n}_out.pcap")),
        ),
        (CaptureNames::Interface, PortKind::Pcap { .. }) => (
            dir.join(format!("port{}_in.pcap", s.number)),
            dir.join(format!("port{}_out.pcap", s.number)),
        ),
    }
}

/// Reject port lists that cannot work: a port number given twice or equal to the CPU port, an
/// interface named twice, a file written by two ports (or the capture) or both read and written.
pub fn check_ports(
    specs: &[PortSpec],
    cpu_port: Option<u32>,
    pcap_dir: Option<(&Path, CaptureNames)>,
) -> Result<(), String> {
    let mut numbers: HashMap<u32, ()> = HashMap::new();
    let mut names: HashMap<&str, u32> = HashMap::new();
    let mut written: HashMap<PathBuf, String> = HashMap::new();
    for s in specs {
        if Some(s.number) == cpu_port {
            return Err(format!(
                "port {} is the CPU port (--cpu-port) and cannot also be given with --port",
                s.number
            ));
        }
        if numbers.insert(s.number, ()).is_some() {
            return Err(format!("port {} is given twice", s.number));
        }
        match &s.kind {
            PortKind::Iface(n) | PortKind::Xdp(n) | PortKind::Tap(n) | PortKind::Tun(n) => {
                if let Some(other) = names.insert(n, s.number) {
                    return Err(format!(
                        "interface `{n}` is named by two ports ({other} and {})",
                        s.number
                    ));
                }
            }
            PortKind::Pcap {
                output: Some(f), ..
            } => {
                if let Some(other) = written.insert(file_key(f), format!("port {}", s.number)) {
                    return Err(format!(
                        "{} is written by two ports ({other} and port {})",
                        f.display(),
                        s.number
                    ));
                }
            }
            PortKind::Pcap { .. } => {}
        }
    }
    if let Some((dir, names)) = pcap_dir {
        for s in specs {
            let (i, o) = capture_files(dir, s, names);
            for f in [i, o] {
                if let Some(other) = written.insert(file_key(&f), "--pcap-dir".into()) {
                    return Err(format!(
                        "{} is written by {other} and by --pcap-dir",
                        f.display()
                    ));
                }
            }
        }
    }
    for s in specs {
        if let PortKind::Pcap { input: Some(f), .. } = &s.kind {
            if let Some(other) = written.get(&file_key(f)) {
                if *other == format!("port {}", s.number) {
                    return Err(format!(
                        "port {}: {} is both read and written by the port",
                        s.number,
                        f.display()
                    ));
                }
                return Err(format!(
                    "port {}: {} is read by the port and written by {other}",
                    s.number,
                    f.display()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_specs() {
        let p = PortSpec::parse("3=tap:t0").unwrap();
        assert_eq!((p.number, p.kind), (3, PortKind::Tap("t0".into())));
        assert_eq!(
            PortSpec::parse("4=tun:x").unwrap().kind,
            PortKind::Tun("x".into())
        );
        assert_eq!(
            PortSpec::parse("1=veth1").unwrap().kind,
            PortKind::Iface("veth1".into())
        );
        assert_eq!(
            PortSpec::parse("2=xdp:veth2").unwrap().kind,
            PortKind::Xdp("veth2".into())
        );
        assert_eq!(
            PortSpec::parse("5=pcap:in=a,b.pcap,out=c.pcap")
                .unwrap()
                .kind,
            PortKind::Pcap {
                input: Some("a,b.pcap".into()),
                output: Some("c.pcap".into())
            }
        );
        assert_eq!(
            PortSpec::parse("5=pcap:out=c.pcap").unwrap().kind,
            PortKind::Pcap {
                input: None,
                output: Some("c.pcap".into())
            }
        );
        for (bad, msg) in [
            ("1=foo:bar", "unknown port kind `foo`"),
            ("x=veth1", "bad port number"),
            ("veth1", "--port needs"),
            ("1=pcap:", "needs in=FILE"),
            ("1=pcap:in=a,in=b", "given twice"),
            ("1=pcap:size=3", "unknown pcap option"),
            (
                "1=pcap:in=a.pcap,snaplen=3",
                "unknown pcap option `snaplen=3`",
            ),
            ("1=tap:", "empty"),
            ("1=xdp:", "empty"),
            ("1=tun:abcdefghijklmnopq", "too long"),
        ] {
            let e = PortSpec::parse(bad).unwrap_err();
            assert!(e.contains(msg), "{bad}: {e}");
        }
    }

    #[test]
    fn duplicates_are_rejected() {
        let specs = |v: &[&str]| {
            v.iter()
                .map(|s| PortSpec::parse(s).unwrap())
                .collect::<Vec<_>>()
        };
        assert!(check_ports(&specs(&["1=a", "2=xdp:a"]), None, None)
            .unwrap_err()
            .contains("interface `a` is named by two ports"));
        assert!(check_ports(&specs(&["1=a", "1=b"]), None, None)
            .unwrap_err()
            .contains("port 1 is given twice"));
        assert!(check_ports(&specs(&["1=a", "2=tap:a"]), None, None)
            .unwrap_err()
            .contains("interface `a` is named by two ports"));
        assert!(check_ports(
            &specs(&["1=pcap:out=/tmp/x.pcap", "2=pcap:out=/tmp/x.pcap"]),
            None,
            None
        )
        .unwrap_err()
        .contains("written by two ports"));
        assert!(check_ports(
            &specs(&["1=pcap:in=/tmp/x.pcap", "2=pcap:out=/tmp/x.pcap"]),
            None,
            None
        )
        .unwrap_err()
        .contains("read by the port"));
        assert!(check_ports(&specs(&["1=a"]), Some(1), None)
            .unwrap_err()
            .contains("CPU port"));
        assert!(check_ports(&specs(&["1=a", "2=b"]), Some(3), None).is_ok());
    }
}
