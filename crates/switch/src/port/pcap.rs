//! pcap ports (`--port N=pcap:in=FILE,out=FILE`): frames read from a file enter on the port (the
//! first worker reads it), frames sent to the port are written to another (shared by the workers).

use super::io::{Ctx, PortIo};
use crate::log::Level;
use crate::pcap_file::{Reader, Ts, Writer};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// A pcap port as one worker has it: the input (only the first worker's) and the output.
pub struct Pcap {
    input: Option<Reader>,
    output: Option<Arc<Mutex<Writer>>>,
}

impl Pcap {
    pub fn new(input: Option<Reader>, output: Option<Arc<Mutex<Writer>>>) -> Pcap {
        Pcap { input, output }
    }
}

impl PortIo for Pcap {
    /// None: the input is read without waiting.
    fn fd(&self) -> i32 {
        -1
    }

    /// The next frame of the input, with its timestamp; `None` once the input is finished (or
    /// unreadable).
    fn recv(
        &mut self,
        cx: &Ctx,
        buf: &mut [u8],
        _woken: bool,
    ) -> Option<(*const u8, usize, Option<Ts>)> {
        let r = self.input.as_mut()?;
        match r.next(buf, cx.number) {
            Ok(Some((n, ts))) => Some((buf.as_ptr(), n, Some(ts))),
            Ok(None) => {
                p4log!(
                    Level::Info,
                    "port {}: end of {} ({} frames)",
                    cx.number,
                    r.path.display(),
                    r.frames
                );
                self.input = None;
                None
            }
            Err(e) => {
                p4log!(
                    Level::Error,
                    "port {}: {e}; no more frames are read from it",
                    cx.number
                );
                cx.stats.errors.fetch_add(1, Ordering::Relaxed);
                self.input = None;
                None
            }
        }
    }

    /// Written to the output (discarded without one).
    fn send(&self, _cx: &Ctx, frame: &[u8], ts: Ts) -> Option<bool> {
        Some(match &self.output {
            Some(w) => w
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .write(ts, frame)
                .is_ok(),
            None => true,
        })
    }

    fn up(&self, _cx: &Ctx) -> bool {
        true
    }

    fn alive(&self, _cx: &Ctx) -> bool {
        true
    }

    fn has_input(&self) -> bool {
        self.input.is_some()
    }

    fn writes(&self) -> bool {
        self.output.is_some()
    }

    fn flush(&self) {
        if let Some(w) = &self.output {
            let _ = w.lock().unwrap_or_else(|p| p.into_inner()).flush();
        }
    }
}
