//! The run-time control endpoint for the commands BMv2 users send with `simple_switch_CLI`:
//! `set_queue_depth DEPTH [PORT]` and `set_queue_rate RATE_PPS [PORT]` (every port without PORT).
//!
//! Transport: plain text over TCP (the port `--thrift-port` gives, on the loopback address by
//! default). A client sends one command per line; the switch answers each with one line, `ok` or
//! `error: WHY`. Blank lines and lines starting with `#` are answered `ok` and change nothing.
//! `p4sec switch-cli` (also as a program named `simple_switch_CLI`) is the client: it reads command
//! lines on its standard input.

use crate::log::Level;
use crate::tm::{Setting, TrafficManager};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// The commands the endpoint knows, for messages.
pub const COMMANDS: &str = "set_queue_depth DEPTH [PORT], set_queue_rate RATE_PPS [PORT]";

/// One command line: `None` for a blank line or a comment, else the port (none: every port) and the
/// setting.
pub fn parse(line: &str) -> Result<Option<(Option<u32>, Setting)>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    let (cmd, args) = (words[0], &words[1..]);
    let usage = match cmd {
        "set_queue_depth" => "set_queue_depth DEPTH [PORT]",
        "set_queue_rate" => "set_queue_rate RATE_PPS [PORT]",
        _ => {
            return Err(format!(
                "unknown command `{cmd}` (p4sec's switch takes {COMMANDS})"
            ))
        }
    };
    if args.is_empty() || args.len() > 2 {
        return Err(format!("usage: {usage}"));
    }
    let port = match args.get(1) {
        Some(p) => Some(
            p.parse::<u32>()
                .map_err(|_| format!("{cmd}: `{p}` is not a port number (usage: {usage})"))?,
        ),
        None => None,
    };
    let setting = if cmd == "set_queue_depth" {
        let d = args[0].parse::<usize>().map_err(|_| {
            format!(
                "{cmd}: `{}` is not a number of packets (usage: {usage})",
                args[0]
            )
        })?;
        Setting::Depth(d)
    } else {
        let r = args[0].parse::<f64>().map_err(|_| {
            format!(
                "{cmd}: `{}` is not a rate in packets per second (usage: {usage})",
                args[0]
            )
        })?;
        Setting::Rate(r)
    };
    Ok(Some((port, setting)))
}

/// Apply one command line to the traffic manager; the answer line (without its newline).
pub fn apply(tm: &TrafficManager, line: &str) -> String {
    let r = parse(line).and_then(|c| match c {
        None => Ok(()),
        Some((port, s)) => tm.set(port, s),
    });
    match r {
        Ok(()) => {
            if !line.trim().is_empty() && !line.trim().starts_with('#') {
                p4log!(Level::Info, "control: {}", line.trim());
            }
            "ok".into()
        }
        Err(e) => format!("error: {e}"),
    }
}

fn session(c: TcpStream, tm: &TrafficManager) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(600)));
    let Ok(mut w) = c.try_clone() else { return };
    let mut r = BufReader::new(c);
    let mut line = String::new();
    loop {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if writeln!(w, "{}", apply(tm, &line)).is_err() {
            return;
        }
    }
}

/// Serve the control endpoint on `addr` from a background thread (one thread per client).
pub fn serve(addr: SocketAddr, tm: Arc<TrafficManager>) -> Result<SocketAddr, String> {
    let l = TcpListener::bind(addr)
        .map_err(|e| format!("control endpoint: cannot listen on {addr}: {e}"))?;
    let at = l
        .local_addr()
        .map_err(|e| format!("control endpoint: {e}"))?;
    std::thread::Builder::new()
        .name("p4sec-control".into())
        .spawn(move || {
            for c in l.incoming().flatten() {
                let tm = tm.clone();
                let _ = std::thread::Builder::new()
                    .name("p4sec-control-client".into())
                    .spawn(move || session(c, &tm));
            }
        })
        .map_err(|e| format!("control endpoint: {e}"))?;
    Ok(at)
}

/// The client: send each line of `input` to the endpoint at `addr` and copy the answers; errors go
/// to `err` (with the line they answer). Returns how many commands failed, or why the endpoint
/// could not be used.
pub fn client(
    addr: &str,
    input: impl BufRead,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<usize, String> {
    let c = TcpStream::connect(addr)
        .map_err(|e| format!("cannot reach the switch's control endpoint at {addr}: {e} (is the switch running with --thrift-port?)"))?;
    let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
    let mut w = c.try_clone().map_err(|e| e.to_string())?;
    let mut r = BufReader::new(c);
    let mut failed = 0;
    for line in input.lines() {
        let line = line.map_err(|e| format!("reading the commands: {e}"))?;
        writeln!(w, "{line}")
            .map_err(|e| format!("the switch closed the control connection: {e}"))?;
        let mut answer = String::new();
        r.read_line(&mut answer)
            .map_err(|e| format!("no answer from the switch: {e}"))?;
        let answer = answer.trim_end();
        if answer.is_empty() {
            return Err("the switch closed the control connection".into());
        }
        if let Some(e) = answer.strip_prefix("error: ") {
            failed += 1;
            let _ = writeln!(err, "Error: {e} (in `{}`)", line.trim());
        } else if !line.trim().is_empty() && !line.trim().starts_with('#') {
            let _ = writeln!(out, "RuntimeCmd: {}: {answer}", line.trim());
        }
    }
    Ok(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_with_precise_errors() {
        assert_eq!(
            parse("set_queue_rate 100 1").unwrap(),
            Some((Some(1), Setting::Rate(100.0)))
        );
        assert_eq!(
            parse("  set_queue_depth 8").unwrap(),
            Some((None, Setting::Depth(8)))
        );
        assert_eq!(
            parse("set_queue_rate 0.5").unwrap(),
            Some((None, Setting::Rate(0.5)))
        );
        assert_eq!(parse("# a comment").unwrap(), None);
        assert_eq!(parse("").unwrap(), None);
        for (bad, msg) in [
            ("table_add x y", "unknown command `table_add`"),
            ("set_queue_rate", "usage: set_queue_rate RATE_PPS [PORT]"),
            ("set_queue_rate 1 2 3", "usage"),
            ("set_queue_rate fast 1", "`fast` is not a rate"),
            ("set_queue_depth 8 eth0", "`eth0` is not a port number"),
            ("set_queue_depth -1", "not a number of packets"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(msg), "{bad}: {e}");
        }
    }

    #[test]
    fn the_endpoint_applies_commands_and_answers_each_line() {
        let tm = Arc::new(TrafficManager::new(&[1, 2], 1).unwrap());
        let at = serve("127.0.0.1:0".parse().unwrap(), tm.clone()).unwrap();
        let input = "set_queue_rate 100 1\nset_queue_depth 5\n\nbogus 1\nset_queue_rate 10 7\n";
        let (mut out, mut err) = (vec![], vec![]);
        let failed = client(&at.to_string(), input.as_bytes(), &mut out, &mut err).unwrap();
        assert_eq!(failed, 2);
        let (out, err) = (
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        );
        assert!(
            out.contains("set_queue_rate 100 1: ok") && out.contains("set_queue_depth 5: ok"),
            "{out}"
        );
        assert!(
            err.contains("unknown command `bogus`") && err.contains("no port 7"),
            "{err}"
        );
        assert_eq!(tm.port(1).unwrap().rate(), Some(100.0));
        assert_eq!(tm.port(2).unwrap().rate(), None);
        assert_eq!(
            (tm.port(1).unwrap().depth(), tm.port(2).unwrap().depth()),
            (5, 5)
        );
        assert!(tm.active());
        assert!(
            client("127.0.0.1:1", "x\n".as_bytes(), &mut vec![], &mut vec![])
                .unwrap_err()
                .contains("cannot reach")
        );
    }
}
