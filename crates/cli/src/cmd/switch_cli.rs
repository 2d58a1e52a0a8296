//! `p4sec switch-cli` (also run as `simple_switch_CLI`): run-time queue commands from stdin to a
//! running switch's control endpoint ([`p4sec_switch::control::client`]).

use std::path::PathBuf;
use std::process::ExitCode;

// `p4sec switch-cli` (its description is on `Cmd::SwitchCli`)
#[derive(clap::Args)]
pub struct Args {
    /// The switch's control endpoint port (its --thrift-port).
    #[arg(long, default_value_t = 9090)]
    pub thrift_port: u16,
    /// The switch's address.
    #[arg(long, default_value = "127.0.0.1")]
    pub thrift_ip: String,
    /// Accepted for BMv2's sake and unused (the switch knows its program).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Accepted for BMv2's sake and unused.
    #[arg(long, value_name = "PRE")]
    pub pre: Option<String>,
}

pub fn run(a: Args) -> ExitCode {
    let addr = if a.thrift_ip.contains(':') {
        format!("[{}]:{}", a.thrift_ip, a.thrift_port)
    } else {
        format!("{}:{}", a.thrift_ip, a.thrift_port)
    };
    let stdin = std::io::stdin();
    match p4sec_switch::control::client(
        &addr,
        stdin.lock(),
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    ) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("p4sec switch-cli: {e}");
            ExitCode::FAILURE
        }
    }
}
