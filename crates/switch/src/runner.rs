//! A running switch, as `p4sec switch` runs it: [`SwitchOptions::run`] loads the program, opens the
//! ports with their traffic manager, serves the metrics and the run-time control endpoint, starts
//! the control plane's server ([`Controller`]), and waits until the server fails, a batch run is
//! done or SIGINT/SIGTERM arrives; then it closes the ports cleanly (pcap files flushed, TUN/TAP
//! devices removed).

use crate::control_plane::Controller;
use crate::log::Level;
use crate::options::SwitchOptions;
use crate::spec::{check_ports, PortSpec};
use crate::start::{start, Config, Switch};
use std::sync::Arc;

/// Why a run of the switch ended badly: its options (a usage error, exit status 2) or the run
/// itself (a file that cannot be read, a port that cannot be opened, the server failing: 1).
#[derive(Debug, PartialEq)]
pub enum RunError {
    Usage(String),
    Failed(String),
}

impl SwitchOptions {
    /// Run the switch with `control` as its control plane until it is done (see the module's
    /// documentation). Signal handlers for SIGINT and SIGTERM are installed.
    pub fn run(&self, control: &mut dyn Controller) -> Result<(), RunError> {
        use RunError::{Failed, Usage};
        // `--port 1 veth1` (a space for the `=`): the interface would be read as the program file
        if let Some(n) = self.ports.iter().find(|p| !p.contains('=')) {
            let after = self
                .program
                .as_ref()
                .filter(|p| !p.exists())
                .map(|p| format!(" (and `{}` was read as the program file)", p.display()))
                .unwrap_or_default();
            return Err(Usage(format!(
                "--port takes N=PORT in one word, e.g. --port {n}=veth1 or --port {n}=tap:p4tap0; \
                 got `--port {n}`{after}"
            )));
        }
        if let Some(path) = &self.program {
            let bytes = std::fs::read(path)
                .map_err(|e| Failed(format!("cannot read {}: {e}", path.display())))?;
            control
                .load_program(bytes)
                .map_err(|e| Failed(format!("{}: {e}", path.display())))?;
        }
        let ports = self
            .ports
            .iter()
            .map(|s| PortSpec::parse(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(Usage)?;
        let capture = self.capture.as_ref().map(|(d, n)| (d.as_path(), *n));
        check_ports(&ports, self.cpu_port, capture).map_err(Usage)?;
        if self.workers == 0 || self.workers > 64 {
            return Err(Usage(format!(
                "--workers must be 1..64, got {}",
                self.workers
            )));
        }
        let numbers: Vec<u32> = ports.iter().map(|p| p.number).collect();
        let tm = Arc::new(self.queues.traffic_manager(&numbers).map_err(Usage)?);
        crate::signal::install_signal_handlers();
        let plane = control.plane();
        let (mut port_stats, mut worker_stats) = (vec![], vec![]);
        let mut switch = None;
        if !ports.is_empty() || self.cpu_port.is_some() {
            let cfg = Config {
                ports,
                workers: self.workers,
                trace: self.trace,
                pcap_dir: self.capture.as_ref().map(|(d, _)| d.clone()),
                pcap_names: self.capture.as_ref().map(|(_, n)| *n).unwrap_or_default(),
                bmv2_log: self.bmv2_log,
                tm: Some(tm.clone()),
            };
            let s = start(plane.clone(), &cfg).map_err(Failed)?;
            port_stats = s.stats.clone();
            worker_stats = s.workers.clone();
            switch = Some(s);
        }
        let stop = |s: Option<Switch>| {
            if let Some(s) = s {
                s.shutdown();
            }
        };
        if let Some(addr) = self.metrics {
            let served =
                crate::metrics::serve(addr, plane, port_stats, worker_stats, Some(tm.clone()));
            if let Err(e) = served {
                stop(switch);
                return Err(Failed(e));
            }
        }
        if let Some((port, asked)) = self.queues.control_port {
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            match crate::control::serve(addr, tm.clone()) {
                Ok(at) => p4log!(
                    Level::Info,
                    "control endpoint (p4sec switch-cli, simple_switch_CLI) on {at}"
                ),
                // (the switch forwards all the same: another switch may hold BMv2's default port)
                Err(e) if asked => p4log!(
                    Level::Warn,
                    "{e}; run-time queue commands are not available"
                ),
                Err(e) => p4log!(
                    Level::Warn,
                    "{e}; run-time queue commands are not available (give --thrift-port PORT)"
                ),
            }
        }
        let batch = switch.as_ref().map(|s| s.is_batch()).unwrap_or(false);
        if let Err(e) = control.serve(batch && self.program.is_some()) {
            stop(switch);
            control.stop();
            return Err(Failed(e));
        }
        let end = wait(switch.as_ref(), control);
        stop(switch);
        control.stop();
        end
    }
}

/// Waits until the server ends, a batch run is done or a signal arrives.
fn wait(switch: Option<&Switch>, control: &mut dyn Controller) -> Result<(), RunError> {
    loop {
        if let Some(r) = control.ended() {
            return r.map_err(RunError::Failed);
        }
        if let Some(s) = switch.filter(|s| s.finished()) {
            let errors = s.pcap_errors();
            if errors > 0 {
                return Err(RunError::Failed(format!(
                    "the batch run had {errors} pcap read or write errors"
                )));
            }
            return Ok(());
        }
        if crate::signal::signalled() {
            p4log!(Level::Info, "stopping (signal)");
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control_plane::ControlPlane;
    use crate::options::QueueOptions;
    use p4sec_engine::Engine;
    use std::os::unix::net::UnixDatagram;
    use std::path::PathBuf;
    use std::sync::Mutex;

    /// A control plane that records what the run asked of it; its program (`load`) is installed
    /// when the run loads one.
    struct Fake {
        out: (UnixDatagram, UnixDatagram),
        load: Result<Option<Arc<Engine>>, String>,
        engine: Mutex<Option<Arc<Engine>>>,
        server_end: Option<Result<(), String>>,
        calls: Mutex<Vec<String>>,
    }

    impl Fake {
        fn new() -> Fake {
            Fake {
                out: UnixDatagram::pair().unwrap(),
                load: Ok(None),
                engine: Mutex::new(None),
                server_end: None,
                calls: Mutex::new(vec![]),
            }
        }
        fn calls(&self) -> Vec<String> {
            self.calls.lock().unwrap().clone()
        }
    }

    impl ControlPlane for Fake {
        fn engine(&self) -> Option<Arc<Engine>> {
            self.engine.lock().unwrap().clone()
        }
        fn cpu_port(&self) -> Option<u32> {
            None
        }
        fn packet_in(&self, _: &Engine, _: &[u8]) {}
        fn packet_out(&self) -> &UnixDatagram {
            &self.out.0
        }
        fn set_port_up(&self, _: u32, _: bool) {}
        fn deliver_digests(&self, _: &Engine) {}
        fn dropped(&self) -> (u64, u64) {
            (0, 0)
        }
    }

    /// The controller: the fake shared with the run's data path.
    struct Ctl(Arc<Fake>);

    impl Controller for Ctl {
        fn plane(&self) -> Arc<dyn ControlPlane> {
            self.0.clone()
        }
        fn load_program(&self, program: Vec<u8>) -> Result<(), String> {
            let s = String::from_utf8_lossy(&program).into_owned();
            self.0.calls.lock().unwrap().push(format!("load {s}"));
            *self.0.engine.lock().unwrap() = self.0.load.clone()?;
            Ok(())
        }
        fn serve(&mut self, batch: bool) -> Result<(), String> {
            self.0
                .calls
                .lock()
                .unwrap()
                .push(format!("serve batch={batch}"));
            Ok(())
        }
        fn ended(&mut self) -> Option<Result<(), String>> {
            self.0.server_end.clone()
        }
        fn stop(&mut self) {
            self.0.calls.lock().unwrap().push("stop".into());
        }
    }

    fn opts() -> SwitchOptions {
        SwitchOptions {
            workers: 1,
            queues: QueueOptions {
                priority_queues: 1,
                ..QueueOptions::default()
            },
            ..SwitchOptions::default()
        }
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("p4sec-runner-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn bad_options_are_usage_errors_before_anything_is_loaded() {
        let fake = Arc::new(Fake::new());
        let mut o = opts();
        o.ports = vec!["1".into()];
        o.program = Some("veth1".into());
        let e = o.run(&mut Ctl(fake.clone())).unwrap_err();
        assert_eq!(
            e,
            RunError::Usage(
                "--port takes N=PORT in one word, e.g. --port 1=veth1 or --port 1=tap:p4tap0; \
                 got `--port 1` (and `veth1` was read as the program file)"
                    .into()
            )
        );
        let mut o = opts();
        o.workers = 65;
        let e = o.run(&mut Ctl(fake.clone())).unwrap_err();
        assert_eq!(e, RunError::Usage("--workers must be 1..64, got 65".into()));
        let mut o = opts();
        o.ports = vec!["1=pcap:in".into()];
        assert!(matches!(
            o.run(&mut Ctl(fake.clone())),
            Err(RunError::Usage(_))
        ));
        assert!(fake.calls().is_empty(), "{:?}", fake.calls());
    }

    #[test]
    fn a_program_that_cannot_be_read_or_loaded_fails_the_run() {
        let d = tmp("program");
        let mut fake = Fake::new();
        fake.load = Err("not a program file".into());
        let fake = Arc::new(fake);
        let mut o = opts();
        o.program = Some(d.join("missing.json"));
        match o.run(&mut Ctl(fake.clone())).unwrap_err() {
            RunError::Failed(e) => assert!(e.starts_with("cannot read "), "{e}"),
            e => panic!("{e:?}"),
        }
        let p = d.join("program.json");
        std::fs::write(&p, "{}").unwrap();
        o.program = Some(p.clone());
        let e = o.run(&mut Ctl(fake.clone())).unwrap_err();
        assert_eq!(
            e,
            RunError::Failed(format!("{}: not a program file", p.display()))
        );
        assert_eq!(fake.calls(), vec!["load {}".to_string()]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_failing_server_ends_the_run_with_its_error() {
        let mut fake = Fake::new();
        fake.server_end = Some(Err("the server failed".into()));
        let fake = Arc::new(fake);
        let e = opts().run(&mut Ctl(fake.clone())).unwrap_err();
        assert_eq!(e, RunError::Failed("the server failed".into()));
        assert_eq!(fake.calls(), vec!["serve batch=false", "stop"]);
    }

    #[test]
    fn a_batch_run_ends_once_its_input_is_read() {
        let d = tmp("batch");
        let (input, output) = (d.join("in.pcap"), d.join("out.pcap"));
        let mut w = crate::pcap_file::Writer::create(&input).unwrap();
        w.write(crate::pcap_file::Ts { sec: 1, usec: 0 }, &[0xff; 60])
            .unwrap();
        drop(w);
        std::fs::write(d.join("program.json"), "p").unwrap();
        // a batch run waits for a program before it reads its inputs
        let prog = p4sec_frontend::compile_str(
            "ipv4_router.p4",
            include_str!("../../../programs/ipv4_router.p4"),
            &Default::default(),
        )
        .unwrap();
        let registry = p4sec_externs::p4::registry();
        let engine = Engine::new(Arc::new(prog), &registry).unwrap();
        let mut fake = Fake::new();
        fake.load = Ok(Some(Arc::new(engine)));
        let fake = Arc::new(fake);
        let mut o = opts();
        o.program = Some(d.join("program.json"));
        o.ports = vec![format!(
            "1=pcap:in={},out={}",
            input.display(),
            output.display()
        )];
        o.run(&mut Ctl(fake.clone())).unwrap();
        // the server is told it is a batch run with its program; it is stopped at the end
        assert_eq!(fake.calls(), vec!["load p", "serve batch=true", "stop"]);
        assert!(output.exists());
        let _ = std::fs::remove_dir_all(&d);
    }
}
