//! Both engines of a test program (the closure one and the native one), each with the worker and
//! the output a switch keeps across packets: the output's buffer has room and is cleared before
//! each packet, so the native engine's generated emit writes into it itself (a fresh `Outputs` has
//! no room and sends every emit back to its closure). Tests run each packet on both and compare;
//! helpers build the table entries they insert into both.

use crate::{Backend, Engine, Outputs, Worker};
use p4sec_ir::*;
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

/// A value of `width` bits (at most 128) holding `x`, masked to the width.
pub(crate) fn value(width: u32, x: u128) -> Value {
    let x = if width >= 128 {
        x
    } else {
        x & ((1 << width) - 1)
    };
    Value {
        width,
        words: (0..width.div_ceil(64))
            .map(|i| (x >> (64 * i)) as u64)
            .collect(),
    }
}

/// The index of action `name` in `e`'s program.
pub(crate) fn action_index(e: &Engine, name: &str) -> usize {
    e.prog
        .actions
        .iter()
        .position(|a| a.name == name)
        .unwrap_or_else(|| panic!("no action {name}"))
}

/// A call of action `name` with `args` (each at the width of its parameter).
pub(crate) fn call(e: &Engine, name: &str, args: &[u128]) -> ActionCall {
    let i = action_index(e, name);
    let params = &e.prog.actions[i].params;
    assert_eq!(params.len(), args.len(), "arguments of {name}");
    ActionCall {
        action: i as u32,
        args: params
            .iter()
            .zip(args)
            .map(|(p, &x)| value(p.loc.width, x))
            .collect(),
    }
}

/// An entry of a one-key LPM table: `prefix`/`len` of a `width`-bit key runs `action`.
pub(crate) fn lpm(width: u32, prefix: u64, len: u32, action: ActionCall) -> TableEntry {
    TableEntry {
        matches: vec![FieldMatch::Lpm {
            value: Value::new(width, prefix),
            prefix_len: len,
        }],
        action,
        priority: 0,
    }
}

/// An entry of a one-key exact table: `key` of a `width`-bit key runs `action`.
pub(crate) fn exact(width: u32, key: u64, action: ActionCall) -> TableEntry {
    TableEntry {
        matches: vec![FieldMatch::Exact(Value::new(width, key))],
        action,
        priority: 0,
    }
}
