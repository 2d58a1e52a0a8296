//! The compiled form of statements and expressions: closures ([`Sf`], [`Xf`]) over the shared
//! state and a worker, and statement lists ([`Block`]), built at load time by `load/compile.rs`.
//! Generic over the state and the worker, so that the stages holding them can be named by the
//! engine without this module naming the engine back.

/// How a statement list finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Next,
    Break(u32),
    Exit,
    /// Parser error (error code); the parser stops.
    Reject(u32),
}

/// A compiled expression of at most 64 bits, over the shared state `E` and a worker `W` (the
/// engine names them: `crate::engine::XF`).
pub(crate) type Xf<E, W> = Box<dyn Fn(&E, &mut W) -> u64 + Send + Sync>;
/// A compiled statement (`crate::engine::SF`).
pub(crate) type Sf<E, W> = Box<dyn Fn(&E, &mut W) -> Flow + Send + Sync>;

/// A worker that may hold a parser error raised by a statement (`lookahead`), taken once seen.
pub(crate) trait PendingError {
    /// The pending error's code (0: none), cleared.
    fn take_error(&mut self) -> u32;
}

/// A compiled statement list. `checks` is false when no statement of the list can leave a parser
/// error pending (only `lookahead` sets one, and nested blocks report theirs as `Flow::Reject`), so
/// the list runs without testing for one after every statement.
pub(crate) struct Block<E, W> {
    stmts: Vec<Sf<E, W>>,
    checks: bool,
}

impl<E, W: PendingError> Block<E, W> {
    pub(crate) fn new(stmts: Vec<Sf<E, W>>, checks: bool) -> Self {
        Block { stmts, checks }
    }
    #[inline(always)]
    pub fn run(&self, e: &E, w: &mut W) -> Flow {
        if !self.checks {
            // blocks of up to three statements call each from its own call site: a site with a
            // single target is an indirect call the branch predictor gets right without history
            match &self.stmts[..] {
                [a] => return a(e, w),
                [a, b] => {
                    let f = a(e, w);
                    return if matches!(f, Flow::Next) { b(e, w) } else { f };
                }
                [a, b, c] => {
                    let f = a(e, w);
                    if !matches!(f, Flow::Next) {
                        return f;
                    }
                    let f = b(e, w);
                    return if matches!(f, Flow::Next) { c(e, w) } else { f };
                }
                _ => {}
            }
            for s in &self.stmts {
                let f = s(e, w);
                if !matches!(f, Flow::Next) {
                    return f;
                }
            }
            return Flow::Next;
        }
        for s in &self.stmts {
            let f = s(e, w);
            if !matches!(f, Flow::Next) {
                return f;
            }
            let err = w.take_error();
            if err != 0 {
                return Flow::Reject(err);
            }
        }
        Flow::Next
    }
    pub fn is_empty(&self) -> bool {
        self.stmts.is_empty()
    }
}
