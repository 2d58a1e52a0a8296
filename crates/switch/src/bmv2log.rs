//! BMv2's per-packet log: what `simple_switch_grpc --log-console` (or `--log-file FILE`) writes for
//! every packet, so that a BMv2 user reads p4sec's the same way. Each line has BMv2's shape, `[time]
//! [bmv2] [LEVEL] [thread N] [packet id] [cxt 0] message`, and BMv2's wording: the packet received,
//! parser states and headers extracted, each table applied with the key looked up and hit or miss,
//! the action run, `log_msg` messages, drops, the egress port and the packet transmitted; with
//! `--dump-packet-data N`, the first N bytes of each packet received and sent.
//!
//! The lines are made from the engine's trace of the packet (the worker's trace is on only while
//! this log is: no cost otherwise), each written at BMv2's level for it (`-L`): trace for the parser
//! steps and pipeline boundaries, debug for tables, actions and transmission, info for `log_msg` and
//! packet data.

use crate::log::{self, Level};
use std::fmt::Write;

/// What the BMv2 log writes besides the trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// BMv2's `--dump-packet-data N`: the first N bytes of each packet received and sent (0: none).
    pub dump_bytes: usize,
}

/// The per-worker state of the log: the packet counter (BMv2's packet id) and the thread's id.
pub struct Logger {
    opts: Options,
    packets: u64,
    thread: i64,
    text: String,
}

impl Logger {
    pub fn new(opts: Options) -> Logger {
        Logger {
            opts,
            packets: 0,
            // SAFETY: gettid has no preconditions
            thread: unsafe { libc::syscall(libc::SYS_gettid) },
            text: String::new(),
        }
    }

    fn line(&mut self, l: Level, msg: &str) {
        if !log::enabled(l) {
            return;
        }
        let tag = match l {
            Level::Error => 'E',
            Level::Warn => 'W',
            Level::Info => 'I',
            Level::Debug => 'D',
            Level::Trace => 'T',
        };
        let _ = writeln!(
            self.text,
            "[{}] [bmv2] [{tag}] [thread {}] [{}.0] [cxt 0] {msg}",
            clock(),
            self.thread,
            self.packets
        );
    }

    fn data(&mut self, what: &str, frame: &[u8]) {
        if self.opts.dump_bytes == 0 {
            return;
        }
        let n = frame.len().min(self.opts.dump_bytes);
        let mut hex = String::with_capacity(n * 3);
        for b in &frame[..n] {
            let _ = write!(hex, "{b:02x}");
        }
        self.line(Level::Info, &format!("{what} packet data: {hex}"));
    }

    /// Log one packet: received on `port` as `frame`, its path through the pipeline as the engine
    /// traced it (`trace`), and the frames it produced (`out`: port and bytes; `cpu`, the CPU
    /// port).
    pub fn packet<'a>(
        &mut self,
        port: u32,
        frame: &[u8],
        trace: &[String],
        out: impl Iterator<Item = (u32, &'a [u8])>,
        cpu: Option<u32>,
    ) {
        self.line(
            Level::Debug,
            &format!("Processing packet received on port {port}"),
        );
        self.data("Received", frame);
        self.line(Level::Trace, "Parser 'parser': start");
        self.steps(trace);
        for (p, f) in out {
            if Some(p) == cpu {
                self.line(
                    Level::Debug,
                    &format!(
                        "Transmitting packet of size {} to the CPU port {p} (PacketIn)",
                        f.len()
                    ),
                );
            } else {
                self.line(
                    Level::Debug,
                    &format!("Transmitting packet of size {} out of port {p}", f.len()),
                );
            }
            self.data("Sent", f);
        }
        self.finish();
    }

    /// Log a packet leaving its egress queue: the egress pipeline as the engine traced it.
    pub fn dequeued<'a>(
        &mut self,
        port: u32,
        waited_us: u64,
        trace: &[String],
        out: impl Iterator<Item = (u32, &'a [u8])>,
    ) {
        self.line(
            Level::Debug,
            &format!("Packet for port {port} leaves its egress queue after {waited_us} us"),
        );
        self.steps(trace);
        for (p, f) in out {
            self.line(
                Level::Debug,
                &format!("Transmitting packet of size {} out of port {p}", f.len()),
            );
            self.data("Sent", f);
        }
        self.finish();
    }

    fn finish(&mut self) {
        if !self.text.is_empty() {
            log::write_lines(&self.text);
            self.text.clear();
        }
        self.packets += 1;
    }

    /// The engine's trace lines in BMv2's words.
    fn steps(&mut self, trace: &[String]) {
        let mut in_parser = true;
        // the arguments of the action a table apply runs (the line before its outcome)
        let mut args = "";
        for t in trace {
            if let Some(a) = t.strip_prefix("arguments ") {
                args = a;
                continue;
            }
            let (l, msg) = translate(t);
            if in_parser && (t.starts_with("ingress ") || t.starts_with("drop")) {
                in_parser = false;
                self.line(Level::Trace, "Parser 'parser': end");
            }
            if let Some((table, key)) = t
                .strip_prefix("lookup ")
                .and_then(|r| r.split_once(" key "))
            {
                self.line(Level::Debug, &format!("Applying table '{table}'"));
                let mut s = String::from("Looking up key:");
                for f in key.split(", ") {
                    let (name, v) = f.rsplit_once('=').unwrap_or((f, ""));
                    let _ = write!(s, "\n* {name:<24}: {v}");
                }
                self.line(Level::Debug, &s);
                continue;
            }
            if let Some(r) = t.strip_prefix("table ") {
                // "table T hit -> A" / "table T miss -> A"
                if let Some((head, action)) = r.split_once(" -> ") {
                    if let Some((table, outcome)) = head.rsplit_once(' ') {
                        let what = if outcome == "hit" {
                            "hit"
                        } else {
                            "miss, the default action"
                        };
                        self.line(Level::Debug, &format!("Table '{table}': {what}"));
                        let shown = if args.is_empty() {
                            String::new()
                        } else {
                            format!(" - {args},")
                        };
                        self.line(Level::Debug, &format!("Action entry is {action}{shown}"));
                        self.line(Level::Trace, &format!("Action {action}"));
                        args = "";
                        continue;
                    }
                }
            }
            self.line(l, &msg);
        }
    }
}

/// One engine trace line in BMv2's words, with the level BMv2 logs it at.
fn translate(t: &str) -> (Level, String) {
    let (word, rest) = t.split_once(' ').unwrap_or((t, ""));
    match word {
        "parser" if rest.starts_with("state ") => (
            Level::Trace,
            format!("Parser state '{}'", &rest["state ".len()..]),
        ),
        "parser" if rest.starts_with("error ") => (
            Level::Debug,
            format!("Exception while parsing: {}", &rest["error ".len()..]),
        ),
        "extract" => (Level::Debug, format!("Extracting header '{rest}'")),
        "ingress" => (Level::Trace, format!("Pipeline 'ingress': start {rest}")),
        "egress" => {
            // "egress (port P, instance_type T)"
            let port = rest
                .strip_prefix("(port ")
                .and_then(|r| r.split(',').next())
                .unwrap_or("?");
            (
                Level::Debug,
                format!("Egress port is {port}; Pipeline 'egress': start {rest}"),
            )
        }
        "emit" => (Level::Trace, format!("Deparser 'deparser': {t}")),
        "drop:" => (Level::Debug, format!("Dropping packet: {rest}")),
        "extern" if rest.starts_with("fault: ") => (
            Level::Error,
            format!(
                "Extern call failed, packet dropped: {}",
                &rest["fault: ".len()..]
            ),
        ),
        "extern" => (Level::Debug, format!("Extern call {rest}")),
        "log_msg:" => (Level::Info, rest.to_string()),
        _ => (Level::Trace, t.to_string()),
    }
}

/// The time of day (UTC) as BMv2 prints it: `HH:MM:SS.mmm`.
fn clock() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let s = d.as_secs() % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        s / 3600,
        s / 60 % 60,
        s % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_lines_in_bmv2_words() {
        assert_eq!(
            translate("parser state start"),
            (Level::Trace, "Parser state 'start'".into())
        );
        assert_eq!(
            translate("extract hdr.ipv4"),
            (Level::Debug, "Extracting header 'hdr.ipv4'".into())
        );
        assert_eq!(
            translate("drop: dropped in ingress"),
            (Level::Debug, "Dropping packet: dropped in ingress".into())
        );
        assert_eq!(translate("log_msg: ttl=3"), (Level::Info, "ttl=3".into()));
        assert_eq!(
            translate("egress (port 2, instance_type 0)").1,
            "Egress port is 2; Pipeline 'egress': start (port 2, instance_type 0)"
        );
    }

    #[test]
    fn a_packet_has_its_table_key_and_outcome() {
        log::set_level(Level::Trace);
        let mut l = Logger::new(Options { dump_bytes: 4 });
        let trace: Vec<String> = [
            "parser state start",
            "extract hdr.ethernet",
            "ingress (port 1, instance_type 0)",
            "lookup I.fwd key hdr.ethernet.dst=0a0b, sm.ingress_port=001",
            "arguments 2,a0b",
            "table I.fwd hit -> I.send",
            "egress (port 2, instance_type 0)",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        l.packet(1, &[1, 2, 3, 4, 5], &trace[..3], std::iter::empty(), None);
        // (the first packet's text was written; the second is kept to look at)
        l.line(Level::Debug, "Processing packet received on port 1");
        l.steps(&trace);
        l.data("Sent", &[9, 8, 7, 6, 5]);
        let t = l.text.clone();
        assert!(t.contains("[bmv2] [D] [thread"), "{t}");
        assert!(
            t.contains("[1.0] [cxt 0] Processing packet received on port 1"),
            "{t}"
        );
        assert!(t.contains("Applying table 'I.fwd'"), "{t}");
        assert!(t.contains("* hdr.ethernet.dst"), "{t}");
        assert!(t.contains(": 0a0b\n"), "{t}");
        assert!(t.contains("Table 'I.fwd': hit"), "{t}");
        assert!(t.contains("Action entry is I.send - 2,a0b,\n"), "{t}");
        assert!(t.contains("Parser 'parser': end"), "{t}");
        assert!(t.contains("Sent packet data: 09080706\n"), "{t}");
    }
}
