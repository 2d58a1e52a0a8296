//! What `p4sec switch` runs with ([`SwitchOptions`], filled from its command line by the `p4sec`
//! binary), and the traffic manager its queue options describe ([`QueueOptions`]).

use crate::bmv2log;
use crate::spec::CaptureNames;
use crate::tm::{Setting, TrafficManager};
use std::net::SocketAddr;
use std::path::PathBuf;

/// The options of a running switch ([`SwitchOptions::run`], in [`crate::runner`]). The values are as
/// the command line gave them where the switch parses them (ports, queue settings), so that its
/// error messages name the flag and the value.
#[derive(Clone, Debug, Default)]
pub struct SwitchOptions {
    /// A program file to load at start (`p4sec compile`'s program.json); without one the
    /// controller pushes one.
    pub program: Option<PathBuf>,
    /// The ports as `--port` gives them: `N=PORT` ([`crate::PortSpec::parse`]).
    pub ports: Vec<String>,
    /// The CPU port: frames sent to it reach the controller; the controller's enter on it.
    pub cpu_port: Option<u32>,
    /// Packet-processing threads (1..64).
    pub workers: usize,
    /// Serve Prometheus metrics at http://ADDR/metrics.
    pub metrics: Option<SocketAddr>,
    /// Log every packet's path through the pipeline.
    pub trace: bool,
    /// Capture every port's frames into this directory, the files named as the second says.
    pub capture: Option<(PathBuf, CaptureNames)>,
    /// BMv2's per-packet log ([`crate::bmv2log`]).
    pub bmv2_log: Option<bmv2log::Options>,
    /// The port queues and the run-time control endpoint.
    pub queues: QueueOptions,
}

/// The traffic manager's options of `p4sec switch`.
#[derive(Clone, Debug, Default)]
pub struct QueueOptions {
    /// `--queue-depth [PORT=]N`, as given (repeatable).
    pub depth: Vec<String>,
    /// `--queue-rate [PORT=]PPS`, as given (repeatable).
    pub rate: Vec<String>,
    /// Priority queues per port (1..8).
    pub priority_queues: usize,
    /// The control endpoint's port on 127.0.0.1, and whether it was asked for (a port that cannot
    /// be listened on is a warning either way; the message differs).
    pub control_port: Option<(u16, bool)>,
}

/// `[PORT=]VALUE` of --queue-depth / --queue-rate.
fn port_value<T: std::str::FromStr>(
    flag: &str,
    arg: &str,
    what: &str,
) -> Result<(Option<u32>, T), String> {
    let (port, v) = match arg.split_once('=') {
        Some((p, v)) => (
            Some(
                p.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("{flag} {arg}: `{p}` is not a port number"))?,
            ),
            v,
        ),
        None => (None, arg),
    };
    let v = v
        .trim()
        .parse::<T>()
        .map_err(|_| format!("{flag} {arg}: `{v}` is not {what} ({flag} takes [PORT=]VALUE)"))?;
    Ok((port, v))
}

impl QueueOptions {
    /// The traffic manager for `ports` with these options applied (settings for every port first,
    /// then those of one port).
    pub fn traffic_manager(&self, ports: &[u32]) -> Result<TrafficManager, String> {
        let tm = TrafficManager::new(ports, self.priority_queues).map_err(|e| e.to_string())?;
        let mut settings = vec![];
        for d in &self.depth {
            let (p, v) = port_value::<usize>("--queue-depth", d, "a number of packets")?;
            settings.push((p, Setting::Depth(v), format!("--queue-depth {d}")));
        }
        for r in &self.rate {
            let (p, v) = port_value::<f64>("--queue-rate", r, "a rate in packets per second")?;
            settings.push((p, Setting::Rate(v), format!("--queue-rate {r}")));
        }
        settings.sort_by_key(|(p, _, _)| p.is_some());
        for (p, s, flag) in settings {
            tm.set(p, s).map_err(|e| format!("{flag}: {e}"))?;
        }
        Ok(tm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_values_name_the_flag_and_the_value() {
        let q = |depth: &[&str], rate: &[&str]| QueueOptions {
            depth: depth.iter().map(|s| s.to_string()).collect(),
            rate: rate.iter().map(|s| s.to_string()).collect(),
            priority_queues: 1,
            control_port: None,
        };
        let tm = q(&["8", "2=3"], &["2=100"])
            .traffic_manager(&[1, 2])
            .unwrap();
        assert_eq!(tm.port(1).unwrap().depth(), 8);
        assert_eq!(tm.port(2).unwrap().depth(), 3);
        assert_eq!(tm.port(2).unwrap().rate(), Some(100.0));
        assert_eq!(tm.port(1).unwrap().rate(), None);
        let e = q(&["x=3"], &[]).traffic_manager(&[1]).unwrap_err();
        assert_eq!(e, "--queue-depth x=3: `x` is not a port number");
        let e = q(&[], &["fast"]).traffic_manager(&[1]).unwrap_err();
        assert_eq!(
            e,
            "--queue-rate fast: `fast` is not a rate in packets per second (--queue-rate takes \
             [PORT=]VALUE)"
        );
    }
}
