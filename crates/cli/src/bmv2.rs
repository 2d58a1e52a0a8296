//! BMv2's command lines on p4sec: the options of `simple_switch`/`simple_switch_grpc` that p4sec's
//! switch has no flag of its own for ([`Bmv2Opts`], each honoured or accepted with a one-line note
//! of what p4sec does instead), its target options after `--` ([`TargetOptions`]), and the program
//! names scripts call (`simple_switch_grpc`, `simple_switch`, `simple_switch_CLI`, `p4c`,
//! `p4c-bm2-ss`) mapped to p4sec's subcommands ([`subcommand_args`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The hidden flag `p4c`/`p4c-bm2-ss` (run by those names) pass to `p4sec compile`: write only
/// what p4c writes (NAME.json and the P4Info files asked for).
pub const AS_P4C: &str = "--as-p4c";

/// The arguments with the subcommand that the program's name (argv\[0\]) stands for inserted:
/// `simple_switch_grpc` and `simple_switch` run the switch with BMv2's flags, `simple_switch_CLI`
/// the control client, `p4c` and `p4c-bm2-ss` the compiler with p4c's flags.
pub fn subcommand_args(mut args: Vec<OsString>) -> Vec<OsString> {
    let name = args
        .first()
        .and_then(|a| Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let insert: &[&str] = match name.as_str() {
        "simple_switch_grpc" | "simple_switch" => &["simple_switch_grpc"],
        "simple_switch_CLI" => &["switch-cli"],
        "p4c" | "p4c-bm2-ss" => &["compile", AS_P4C],
        _ => &[],
    };
    for (i, a) in insert.iter().enumerate() {
        args.insert(1 + i, (*a).into());
    }
    args
}

/// BMv2's own options of `simple_switch_grpc` (those p4sec's switch has no flag of its own for).
#[derive(clap::Args, Debug, Default)]
pub struct Bmv2Opts {
    /// BMv2's --pcap [DIR]: write every port's received and sent frames to DIR/IFACE_in.pcap and
    /// DIR/IFACE_out.pcap, named after the interface as BMv2 names them [DIR default: .].
    #[arg(long = "pcap", value_name = "DIR", num_args = 0..=1, default_missing_value = ".",
          conflicts_with = "pcap_dir")]
    pub pcap: Option<PathBuf>,
    /// BMv2's --use-files SECONDS: each -i N@IFACE port reads its frames from IFACE_in.pcap and
    /// writes those sent to IFACE_out.pcap, after SECONDS.
    #[arg(long, value_name = "SECONDS")]
    pub use_files: Option<f64>,
    /// BMv2's nanomsg packet interface: not in p4sec (an error; give the ports with -i).
    #[arg(long, value_name = "ADDR")]
    pub packet_in: Option<String>,
    /// BMv2's nanomsg event log: accepted, noted; p4sec's per-packet log is the console or
    /// --log-file log.
    #[arg(long, value_name = "ADDR")]
    pub nanolog: Option<String>,
    /// Log on the console (stderr), at BMv2's default level trace: every packet's path through
    /// the pipeline in BMv2's words.
    #[arg(long)]
    pub log_console: bool,
    /// Write the log to FILE instead (at BMv2's default level trace, as --log-console).
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
    /// With --log-file: flush the file after every message.
    #[arg(long)]
    pub log_flush: bool,
    /// BMv2's nanomsg notifications: accepted, noted; digests and idle timeouts reach the
    /// controller on the P4Runtime stream.
    #[arg(long, value_name = "ADDR")]
    pub notifications_addr: Option<String>,
    /// BMv2's saved state: not readable by p4sec (an error; write the entries over P4Runtime).
    #[arg(long, value_name = "FILE")]
    pub restore_state: Option<PathBuf>,
    /// With a log: the first BYTES bytes of each packet received and sent, in hex, at info level.
    #[arg(long, value_name = "BYTES")]
    pub dump_packet_data: Option<usize>,
    /// The port numbers must be below N [as simple_switch_grpc: 512, BMv2's].
    #[arg(long, value_name = "N")]
    pub max_port_count: Option<u32>,
    /// Print p4sec's version and exit.
    #[arg(short = 'v', long = "version")]
    pub version: bool,
    /// Print the BMv2 JSON version this accepts (none: p4sec's program files) and exit.
    #[arg(long)]
    pub json_version: bool,
    /// BMv2's debugger: accepted, noted (not in p4sec; -L trace logs each packet's path).
    #[arg(long)]
    pub debugger: bool,
    /// BMv2's debugger address: accepted, noted.
    #[arg(long, value_name = "ADDR")]
    pub debugger_addr: Option<String>,
}

/// What the BMv2 options come to: the notes to log, the ports rewritten, and the settings.
pub struct Bmv2Plan {
    /// One line each, logged at info level once the log is set up.
    pub notes: Vec<String>,
    /// `--use-files`: seconds to wait before the ports start.
    pub wait: Option<std::time::Duration>,
    /// The per-packet log (`--log-console`/`--log-file`).
    pub packet_log: bool,
}

impl Bmv2Opts {
    /// Check the options against the ports (`N@IFACE` of -i, turned into `--port` specs here) and
    /// say what they come to; an option p4sec cannot honour safely is an error naming it.
    pub fn plan(
        &self,
        interfaces: &[String],
        ports: &mut Vec<String>,
        xdp: bool,
        as_bmv2: bool,
    ) -> Result<Bmv2Plan, String> {
        let mut notes = vec![];
        if let Some(a) = &self.packet_in {
            return Err(format!("--packet-in {a}: p4sec has no nanomsg packet interface; give the ports with -i N@IFACE (or --port N=tap:NAME, N=pcap:in=FILE)"));
        }
        if let Some(f) = &self.restore_state {
            return Err(format!("--restore-state {}: p4sec cannot read BMv2's saved state (the Thrift serialize_state format); start the switch and write the entries over P4Runtime", f.display()));
        }
        if let Some(a) = &self.nanolog {
            notes.push(format!("--nanolog {a}: p4sec publishes no nanomsg event log; the per-packet log is written with --log-console (stderr) or --log-file"));
        }
        if let Some(a) = &self.notifications_addr {
            notes.push(format!("--notifications-addr {a}: p4sec sends digests and idle-timeout notifications on the P4Runtime stream, not over nanomsg"));
        }
        if self.debugger || self.debugger_addr.is_some() {
            notes.push("--debugger: p4sec has no BMv2 debugger; -L trace with --log-console logs each packet's path".into());
        }
        if self.log_flush && self.log_file.is_none() {
            notes.push("--log-flush without --log-file: the console log is never buffered".into());
        }
        let wait = match self.use_files {
            Some(s) if !(0.0..=86_400.0).contains(&s) => {
                return Err(format!(
                    "--use-files {s}: the seconds to wait must be 0..86400"
                ))
            }
            Some(s) => Some(std::time::Duration::from_secs_f64(s)),
            None => None,
        };
        for i in interfaces {
            match i.split_once('@') {
                Some((n, iface)) if !n.is_empty() && !iface.is_empty() => {
                    if wait.is_some() {
                        ports.push(format!("{n}=pcap:in={iface}_in.pcap,out={iface}_out.pcap"));
                    } else {
                        ports.push(format!("{n}={}{iface}", if xdp { "xdp:" } else { "" }))
                    }
                }
                _ => {
                    return Err(format!(
                        "-i takes N@IFACE (a port number and a Linux interface), got `{i}`"
                    ))
                }
            }
        }
        if wait.is_some() {
            notes.push("--use-files: the -i ports read IFACE_in.pcap and write IFACE_out.pcap; with only those ports and no CPU port the switch stops once every input is processed".into());
        }
        let max = self.max_port_count.or(as_bmv2.then_some(512));
        if let Some(max) = max {
            for p in ports.iter() {
                let n = p.split(['=', '@']).next().unwrap_or("");
                if let Ok(n) = n.trim().parse::<u64>() {
                    if n >= max as u64 {
                        return Err(format!("port {n} is not below --max-port-count {max} (BMv2's limit on port numbers; give a larger --max-port-count)"));
                    }
                }
            }
        }
        Ok(Bmv2Plan {
            notes,
            wait,
            packet_log: self.log_console || self.log_file.is_some(),
        })
    }
}

/// BMv2's target options, given after `--` (each also as `--flag=VALUE`).
#[derive(Default)]
pub struct TargetOptions {
    pub grpc_server_addr: Option<String>,
    pub cpu_port: Option<u32>,
    pub priority_queues: Option<usize>,
    /// `--grpc-server-ssl` with `--grpc-server-cert`, `--grpc-server-key` and, for
    /// `--grpc-server-with-client-auth`, `--grpc-server-cacert`.
    pub tls: Option<p4sec_p4runtime::server::TlsFiles>,
    /// One line each, logged at info level.
    pub notes: Vec<String>,
}

impl TargetOptions {
    pub fn parse(args: &[String]) -> Result<TargetOptions, String> {
        let mut t = TargetOptions::default();
        let (mut ssl, mut client_auth) = (false, false);
        let (mut cert, mut key, mut ca) = (None, None, None);
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let (flag, inline) = match a.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
                _ => (a.as_str(), None),
            };
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| it.next().cloned())
                    .ok_or_else(|| format!("target option {flag} needs a value"))
            };
            match flag {
                "--grpc-server-addr" => t.grpc_server_addr = Some(value()?),
                "--cpu-port" => {
                    let v = value()?;
                    t.cpu_port = Some(v.parse().map_err(|_| {
                        format!("target option --cpu-port: `{v}` is not a port number")
                    })?);
                }
                "--priority-queues" => {
                    let v = value()?;
                    t.priority_queues = Some(v.parse().map_err(|_| {
                        format!("target option --priority-queues: `{v}` is not a number of queues")
                    })?);
                }
                "--drop-port" => {
                    let v = value()?;
                    if v.trim() != "511" {
                        return Err(format!("target option --drop-port {v}: p4sec's drop port is 511, BMv2's default (mark_to_drop sets egress_spec to 511)"));
                    }
                }
                "--load-modules" => {
                    let v = value()?;
                    return Err(format!("target option --load-modules {v}: p4sec loads no BMv2 extern modules (.so); its externs are built in (docs/externs.md)"));
                }
                "--enable-swap" => t.notes.push("--enable-swap: p4sec always swaps a pushed pipeline in atomically, between packets".into()),
                "--dp-grpc-server-addr" => {
                    let v = value()?;
                    return Err(format!("target option --dp-grpc-server-addr {v}: p4sec has no gRPC data-plane interface; give the ports with -i N@IFACE"));
                }
                "--grpc-server-ssl" => ssl = true,
                "--grpc-server-with-client-auth" => client_auth = true,
                "--grpc-server-cert" => cert = Some(PathBuf::from(value()?)),
                "--grpc-server-key" => key = Some(PathBuf::from(value()?)),
                "--grpc-server-cacert" => ca = Some(PathBuf::from(value()?)),
                _ => {
                    return Err(format!(
                        "unknown target option `{a}` after `--` (p4sec takes simple_switch_grpc's: --grpc-server-addr ADDR, --cpu-port N, --priority-queues N, --drop-port 511, --enable-swap, --grpc-server-ssl, --grpc-server-cert F, --grpc-server-key F, --grpc-server-cacert F, --grpc-server-with-client-auth)"
                    ))
                }
            }
        }
        if ssl {
            let (Some(cert), Some(key)) = (cert, key) else {
                return Err("target option --grpc-server-ssl needs --grpc-server-cert FILE and --grpc-server-key FILE".into());
            };
            if client_auth && ca.is_none() {
                return Err("target option --grpc-server-with-client-auth needs --grpc-server-cacert FILE (the CA client certificates are checked against)".into());
            }
            // BMv2 lets every client its CA signed program it (no roles): `--tls-writers *`
            let authz = match client_auth {
                true => Some(p4sec_p4runtime::authz::Policy::new(
                    &["*".to_string()],
                    &[],
                )?),
                false => None,
            };
            t.tls = Some(p4sec_p4runtime::server::TlsFiles {
                cert,
                key,
                client_ca: if client_auth { ca } else { None },
                authz,
                revoked: None,
            });
        } else if cert.is_some() || key.is_some() || ca.is_some() || client_auth {
            return Err("target options --grpc-server-cert/-key/-cacert/-with-client-auth need --grpc-server-ssl".into());
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn program_names_pick_the_subcommand() {
        let a = |n: &str| {
            subcommand_args(vec![n.into(), "x".into()])
                .into_iter()
                .map(|o| o.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(a("/usr/bin/p4c"), ["/usr/bin/p4c", "compile", AS_P4C, "x"]);
        assert_eq!(a("p4c-bm2-ss"), ["p4c-bm2-ss", "compile", AS_P4C, "x"]);
        assert_eq!(
            a("simple_switch"),
            ["simple_switch", "simple_switch_grpc", "x"]
        );
        assert_eq!(
            a("simple_switch_CLI"),
            ["simple_switch_CLI", "switch-cli", "x"]
        );
        assert_eq!(a("p4sec"), ["p4sec", "x"]);
    }

    #[test]
    fn target_options_tls_and_refusals() {
        let t = TargetOptions::parse(&s(&[
            "--grpc-server-ssl",
            "--grpc-server-cert=c.pem",
            "--grpc-server-key",
            "k.pem",
            "--drop-port",
            "511",
        ]))
        .unwrap();
        let tls = t.tls.unwrap();
        assert_eq!(tls.cert, PathBuf::from("c.pem"));
        assert!(tls.client_ca.is_none());
        let e = TargetOptions::parse(&s(&["--drop-port", "64"]))
            .err()
            .unwrap();
        assert!(e.contains("--drop-port 64"), "{e}");
        let e = TargetOptions::parse(&s(&["--grpc-server-ssl"]))
            .err()
            .unwrap();
        assert!(e.contains("--grpc-server-cert"), "{e}");
        let e = TargetOptions::parse(&s(&["--load-modules", "x.so"]))
            .err()
            .unwrap();
        assert!(e.contains("x.so"), "{e}");
    }

    #[test]
    fn use_files_and_max_port_count() {
        let o = Bmv2Opts {
            use_files: Some(0.0),
            ..Default::default()
        };
        let mut ports = vec![];
        let p = o.plan(&s(&["1@s1-eth1"]), &mut ports, false, true).unwrap();
        assert_eq!(ports, ["1=pcap:in=s1-eth1_in.pcap,out=s1-eth1_out.pcap"]);
        assert!(p.wait.is_some() && !p.packet_log);
        let e = Bmv2Opts::default()
            .plan(&s(&["600@veth0"]), &mut vec![], false, true)
            .err()
            .unwrap();
        assert!(e.contains("port 600") && e.contains("512"), "{e}");
        // p4sec's own command line has no such limit unless asked for
        assert!(Bmv2Opts::default()
            .plan(&s(&["600@veth0"]), &mut vec![], false, false)
            .is_ok());
    }
}
