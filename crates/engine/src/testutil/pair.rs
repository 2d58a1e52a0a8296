//! Both engines of a test program (the closure one and the native one), each with the worker and
//! the output a switch keeps across packets: the output's buffer has room and is cleared before
//! each packet, so the native engine's generated emit writes into it itself (a fresh `Outputs` has
//! no room and sends every emit back to its closure). Tests run each packet on both and compare.

use crate::{Backend, Engine, Outputs, Worker};
use std::cell::{RefCell, RefMut};
use std::fmt::Display;
use std::ops::Deref;
use std::sync::Arc;

/// The room an output's buffer is given before the first packet.
const ROOM: usize = 4096;

/// One engine with its kept worker and output; it derefs to the engine.
pub(crate) struct Kept {
    engine: Engine,
    worker: RefCell<Worker>,
    out: RefCell<Outputs>,
}

impl Kept {
    fn new(engine: Engine) -> Kept {
        let worker = RefCell::new(Worker::new(&engine));
        let mut out = Outputs::default();
        out.data.reserve(ROOM);
        Kept {
            engine,
            worker,
            out: RefCell::new(out),
        }
    }

    /// The kept worker, for a test's own calls into the engine.
    pub(crate) fn worker(&self) -> RefMut<'_, Worker> {
        self.worker.borrow_mut()
    }

    /// Every frame `pkt` sends (port and bytes), through the kept worker (or a new one when
    /// `fresh`) into the kept output, cleared first.
    pub(crate) fn frames(&self, pkt: &[u8], fresh: bool) -> Vec<(u32, Vec<u8>)> {
        let mut new;
        let mut kept;
        let w = if fresh {
            new = Worker::new(&self.engine);
            &mut new
        } else {
            kept = self.worker();
            &mut *kept
        };
        let mut o = self.out.borrow_mut();
        o.clear();
        self.engine.process(w, 0, pkt, &mut o);
        o.iter().map(|(p, f)| (p, f.to_vec())).collect()
    }
}

impl Deref for Kept {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        &self.engine
    }
}

/// The closure and the native engine of P4 source `src` (with the test externs).
pub(crate) fn engines(src: &str) -> [Kept; 2] {
    let prog = Arc::new(
        p4sec_frontend::compile_str("test.p4", src, &Default::default())
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let reg = crate::test_externs::registry();
    let a = Engine::with_backend(prog.clone(), &reg, Backend::Closure).unwrap();
    let b = Engine::with_backend(prog, &reg, Backend::Native).unwrap();
    assert_eq!(b.backend(), Backend::Native);
    [Kept::new(a), Kept::new(b)]
}

/// The first frame `pkt` sends on each engine (through their kept workers, or new ones when
/// `fresh`), asserted equal (`what` names the packet when they differ); `None` when dropped.
pub(crate) fn first_frame(
    es: [&Kept; 2],
    pkt: &[u8],
    fresh: bool,
    what: &dyn Display,
) -> Option<Vec<u8>> {
    let [a, b] = es.map(|e| e.frames(pkt, fresh).into_iter().next().map(|f| f.1));
    assert_eq!(a, b, "closure vs native, {what}");
    b
}
