//! The one interface between the engine and every extern (v1model's own and p4sec's security
//! externs).
//!
//! The engine resolves an extern *type* by the name declared in a P4 include file, instantiates it
//! once per P4 instance with the constructor arguments, resolves each method call to an index at
//! compile/load time, and then calls [`ExternObject::call`] per packet. Arguments are fixed-width
//! bit strings; a header or struct argument is flattened by the engine into one bit string (fields
//! concatenated in declaration order, most significant bit first). `out`/`inout` arguments are
//! written back by the engine after the call.
//!
//! Failures that a P4 program must see are reported through `out` arguments (status codes defined
//! by the extern's P4 declaration); [`ExternError`] is for conditions the engine records as an
//! extern fault.

use crate::layout::ArgLayout;
use std::fmt;

/// Direction of a method parameter, as declared in P4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    In,
    Out,
    InOut,
}

/// A fixed-width bit string: the numeric value, big-endian, in `ceil(width/8)` bytes (the unused
/// high bits of the first byte are zero). For widths that are multiples of 8 this is exactly the
/// wire representation. The engine reuses these buffers across packets, so an extern must not keep
/// references to them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BitBuf {
    pub width: u32,
    pub bytes: Vec<u8>,
}

impl BitBuf {
    pub fn zero(width: u32) -> Self {
        BitBuf {
            width,
            bytes: vec![0; width.div_ceil(8) as usize],
        }
    }
    /// The value as u64 (low 64 bits).
    pub fn as_u64(&self) -> u64 {
        let n = self.bytes.len();
        let start = n.saturating_sub(8);
        self.bytes[start..]
            .iter()
            .fold(0u64, |a, &b| (a << 8) | b as u64)
    }
    /// Store `v`, truncated to `width` bits.
    pub fn set_u64(&mut self, v: u64) {
        for (i, b) in self.bytes.iter_mut().rev().enumerate() {
            *b = if i < 8 { (v >> (8 * i)) as u8 } else { 0 };
        }
        mask_top(&mut self.bytes, self.width);
    }
    /// Store big-endian bytes as the value: right-aligned, truncated or zero-extended to the width.
    pub fn set_bytes(&mut self, src: &[u8]) {
        store_be(&mut self.bytes, self.width, src);
    }
}

/// Store big-endian `src` as the value of the `width`-bit string `dst` (`ceil(width/8)` bytes):
/// right-aligned, truncated or zero-extended, the unused high bits of the first byte cleared.
pub fn store_be(dst: &mut [u8], width: u32, src: &[u8]) {
    let n = dst.len();
    let take = src.len().min(n);
    dst[..n - take].fill(0);
    dst[n - take..].copy_from_slice(&src[src.len() - take..]);
    mask_top(dst, width);
}

fn mask_top(bytes: &mut [u8], width: u32) {
    let extra = (bytes.len() as u32 * 8).saturating_sub(width);
    if extra > 0 && !bytes.is_empty() {
        bytes[0] &= 0xffu8 >> extra;
    }
}

/// The bytes of the packet beyond the headers the parser extracted. An extern may read them and
/// rewrite them (ESP replaces the payload with ciphertext and vice versa).
///
/// While nothing has rewritten it, the payload is a read-only view of the received packet, so an
/// extern that only reads it (a hash over the frame, a DFA scan) costs no copy; the first write
/// copies it into the worker's own buffer (its `Vec` capacity is kept across packets).
///
/// An owned payload may start past the front of its buffer ([`Payload::swap_in_from`]: an extern
/// that produced a packet and keeps its first header apart, such as ESP decapsulation, hands the
/// rest over without moving it); the engine keeps that offset with the buffer
/// ([`Payload::owned_from`], [`Payload::skip`]).
pub struct Payload<'a> {
    /// The received packet and where the payload starts in it, while the payload is still that
    /// view.
    pkt: &'a [u8],
    /// [`OWNED`] once the payload is owned.
    at: usize,
    owned: &'a mut Vec<u8>,
    /// Where the payload starts in `owned` (at most its length), when it is owned.
    skip: usize,
    /// How many bytes in front of the payload the engine vouched for ([`Payload::vouch_prefix`]);
    /// 0: none.
    vouched: usize,
}

/// [`Payload::at`] of a payload that is no longer in the received packet (a packet never has
/// that many bytes).
const OWNED: usize = usize::MAX;

impl<'a> Payload<'a> {
    /// Where the payload starts in the received packet, while it is still there.
    #[inline(always)]
    fn at(&self) -> Option<usize> {
        (self.at != OWNED).then_some(self.at)
    }
    /// A payload held in `owned` (tests, and the engine once something rewrote the payload).
    pub fn owned(owned: &'a mut Vec<u8>) -> Self {
        Payload {
            pkt: &[],
            at: OWNED,
            owned,
            skip: 0,
            vouched: 0,
        }
    }
    /// A payload held in `owned` from byte `skip` on (clamped to its length).
    #[inline]
    pub fn owned_from(owned: &'a mut Vec<u8>, skip: usize) -> Self {
        let skip = skip.min(owned.len());
        Payload {
            pkt: &[],
            at: OWNED,
            owned,
            skip,
            vouched: 0,
        }
    }
    /// The payload as `pkt[at..]` (clamped to the packet), with `owned` as the buffer for a
    /// rewrite.
    #[inline]
    pub fn in_packet(pkt: &'a [u8], at: usize, owned: &'a mut Vec<u8>) -> Self {
        Payload {
            pkt,
            at: at.min(pkt.len()),
            owned,
            skip: 0,
            vouched: 0,
        }
    }
    /// [`Payload::in_packet`] with `vouched` as [`Payload::vouch_prefix`] sets it (0: nothing
    /// vouched for), in one step.
    #[inline(always)]
    pub fn in_packet_vouched(
        pkt: &'a [u8],
        at: usize,
        owned: &'a mut Vec<u8>,
        vouched: usize,
    ) -> Self {
        Payload {
            pkt,
            at: at.min(pkt.len()),
            owned,
            skip: 0,
            vouched,
        }
    }
    /// The payload bytes.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        match self.at() {
            Some(at) => &self.pkt[at..],
            None => &self.owned[self.skip..],
        }
    }
    /// Whether the payload is still the view of the received packet (nothing rewrote it).
    #[inline]
    pub fn is_in_packet(&self) -> bool {
        self.at != OWNED
    }
    /// Where an owned payload starts in its buffer (0 while it is in the packet).
    #[inline]
    pub fn skip(&self) -> usize {
        self.skip
    }
    /// The payload as a buffer to rewrite in place (copied out of the packet on first use; an owned
    /// payload that starts past the front of its buffer is moved to the front first).
    pub fn vec_mut(&mut self) -> &mut Vec<u8> {
        if let Some(at) = self.at() {
            self.at = OWNED;
            self.owned.clear();
            self.owned.extend_from_slice(&self.pkt[at..]);
        } else if self.skip > 0 {
            self.owned.drain(..self.skip);
        }
        self.skip = 0;
        self.owned
    }
    /// Make `v` the payload by swapping buffers (no copy); `v` gets the old buffer back, whatever
    /// it holds.
    pub fn swap_in(&mut self, v: &mut Vec<u8>) {
        self.swap_in_from(v, 0);
    }
    /// Make `v[start..]` the payload by swapping buffers (no copy; `start` clamped to `v`'s
    /// length); `v` gets the old buffer back, whatever it holds.
    pub fn swap_in_from(&mut self, v: &mut Vec<u8>, start: usize) {
        self.at = OWNED;
        self.skip = start.min(v.len());
        std::mem::swap(self.owned, v);
    }
    /// Replace the payload with a copy of `bytes`.
    pub fn set(&mut self, bytes: &[u8]) {
        self.at = OWNED;
        self.skip = 0;
        self.owned.clear();
        self.owned.extend_from_slice(bytes);
    }
    /// `prefix ++ payload` as one slice, when the payload is still in the received packet and the
    /// bytes just before it are exactly `prefix` (e.g. a header argument the program did not change
    /// since it was extracted): a hash over headers and payload then reads the frame as it arrived,
    /// in one piece.
    #[inline]
    pub fn with_prefix(&self, prefix: &[u8]) -> Option<&[u8]> {
        let (before, whole) = self.with_bytes_before(prefix.len())?;
        (before == prefix).then_some(whole)
    }
    /// The engine's word, for this call only, that the call site's [`BoundArg::frame_prefix`]
    /// argument is exactly the `n` bytes in front of the payload in the received packet (see
    /// [`Payload::prefix_vouched`]).
    #[inline]
    pub fn vouch_prefix(&mut self, n: usize) {
        self.vouched = n;
    }
    /// Whether the engine vouched that the call site's [`BoundArg::frame_prefix`] argument, `n`
    /// bytes long, is the `n` bytes in front of the payload: a bound call may then read them from
    /// the packet without comparing them with the argument. False once the payload is no longer the
    /// received packet's bytes.
    #[inline]
    pub fn prefix_vouched(&self, n: usize) -> bool {
        n != 0 && self.vouched == n && self.at().is_some_and(|at| at >= n)
    }
    /// The `n` bytes in front of the payload in the received packet, and those bytes followed by
    /// the payload, while the payload is still in the packet.
    #[inline]
    pub fn with_bytes_before(&self, n: usize) -> Option<(&[u8], &[u8])> {
        let at = self.at()?;
        let start = at.checked_sub(n)?;
        Some((&self.pkt[start..at], &self.pkt[start..]))
    }
}

/// Faults the engine records (per extern, per reason) and turns into a drop of the packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExternError {
    /// An argument did not have the width or form the method needs.
    BadArgument(String),
    /// The method index is not one this object resolved.
    UnknownMethod(u32),
    /// Anything else, with a message.
    Failed(String),
}

impl fmt::Display for ExternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExternError::BadArgument(m) => write!(f, "bad argument: {m}"),
            ExternError::UnknownMethod(i) => write!(f, "unknown method index {i}"),
            ExternError::Failed(m) => write!(f, "{m}"),
        }
    }
}
impl std::error::Error for ExternError {}

/// Signature of a method as the program uses it: the resolved widths and directions of its
/// arguments.
#[derive(Clone, Debug)]
pub struct MethodSig {
    pub name: String,
    pub args: Vec<(Dir, u32)>,
    /// Width of the return value, if the method returns `bit<W>`/`bool` (bool is width 1).
    pub ret: Option<u32>,
}

/// One argument of a call site, as the engine resolved it when it compiled the program.
#[derive(Clone, Copy, Debug)]
pub struct BoundArg<'a> {
    pub dir: Dir,
    /// Where the argument's bits are (for `in`) or go (for `out`/`inout`).
    pub layout: &'a ArgLayout,
    /// An `in` argument the engine may vouch for, call by call ([`Payload::prefix_vouched`]): a
    /// whole header that, where vouched, still holds the received bytes in front of the payload. At
    /// most one per call site.
    pub frame_prefix: bool,
}

/// A call site compiled by its extern ([`ExternObject::bind`]): it reads its arguments straight
/// from the engine's slots through their [`ArgLayout`]s and writes its results back the same way,
/// with no argument buffers in between.
pub trait BoundCall: Send + Sync {
    /// Run the call on one packet's slots.
    fn call(&self, slots: &mut [u64], payload: &mut Payload<'_>) -> Result<(), ExternError>;
}

/// An extern type as declared in P4 (`extern Name { ... }` or an extern function).
pub trait ExternType: Send + Sync {
    /// The P4 name of the extern type, e.g. `"esp_sa_table"`.
    fn name(&self) -> &str;
    /// Create one instance. `ctor_args` are the constructor arguments (compile-time constants).
    fn instantiate(
        &self,
        instance_name: &str,
        ctor_args: &[BitBuf],
    ) -> Result<Box<dyn ExternObject>, String>;
    /// The control-plane operation ([`ExternObject::control`]) that undoes `op`, if there is one: a
    /// P4Runtime DELETE of an extern entry written with `op` runs it (e.g. `esp_sad`: `add_sa` is
    /// undone by `del_sa`). Default: none (a DELETE then runs the operation it names).
    fn undo_op(&self, _op: &str) -> Option<&'static str> {
        None
    }
}

/// One instance of an extern. Shared by all workers: state must use interior mutability that is
/// safe and cheap under concurrency (atomics, per-entry locks), never a global lock on the packet
/// path.
pub trait ExternObject: Send + Sync {
    /// Resolve a method at load time; the returned index is what [`ExternObject::call`] receives.
    fn resolve(&self, sig: &MethodSig) -> Result<u32, String>;
    /// Run one method. `args` are in declaration order; `ret` receives the return value if any.
    fn call(
        &self,
        method: u32,
        args: &mut [BitBuf],
        ret: Option<&mut BitBuf>,
        payload: &mut Payload<'_>,
    ) -> Result<(), ExternError>;
    /// Compile one call site of `method` whose arguments all have fixed layouts (and whose return
    /// value, if any, goes to `ret`), or `None` to be called through [`ExternObject::call`] (the
    /// default). A bound call must do exactly what `call` does with the same bit strings; it is how
    /// an extern avoids per-call argument buffers, and how a method settles at load time what its
    /// constant arguments select.
    fn bind(
        &self,
        _method: u32,
        _args: &[BoundArg<'_>],
        _ret: Option<&ArgLayout>,
    ) -> Option<Box<dyn BoundCall>> {
        None
    }
    /// Control-plane access for P4Runtime / the CLI (e.g. installing an SA). Default: unsupported.
    fn control(&self, _op: &str, _args: &[u8]) -> Result<Vec<u8>, String> {
        Err("this extern has no control-plane operations".into())
    }
    /// Events the extern wants to report to the control plane (e.g. SA soft/hard lifetime expiry).
    fn drain_events(&self) -> Vec<String> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::Payload;

    #[test]
    fn payload_is_a_view_until_written() {
        let pkt: Vec<u8> = (0u8..20).collect();
        let mut owned = vec![99u8; 3];
        let mut p = Payload::in_packet(&pkt, 14, &mut owned);
        assert_eq!(p.bytes(), &pkt[14..]);
        assert!(p.is_in_packet());
        // the bytes in front of the payload, and only those, join it into one slice
        assert_eq!(p.with_prefix(&pkt[10..14]), Some(&pkt[10..]));
        assert_eq!(p.with_prefix(&[]), Some(&pkt[14..]));
        assert_eq!(p.with_prefix(&[10, 11, 12, 14]), None);
        assert_eq!(
            p.with_prefix(&pkt[..15]),
            None,
            "longer than what precedes the payload"
        );
        // the first write copies the payload out of the packet
        p.vec_mut().push(7);
        assert!(!p.is_in_packet());
        assert_eq!(p.bytes(), &[14, 15, 16, 17, 18, 19, 7]);
        assert_eq!(
            p.with_prefix(&pkt[13..14]),
            None,
            "an owned payload has nothing in front of it"
        );
        // (the payload's borrow of `owned` ends with its last use above)
        assert_eq!(owned, [14, 15, 16, 17, 18, 19, 7]);
    }

    /// A payload made vouched in one step is the payload made then vouched for: the vouch holds
    /// only for its length and a payload at least that far into the packet; an offset past the
    /// packet is clamped to its end.
    #[test]
    fn a_payload_vouched_in_one_step_is_one_vouched_after() {
        let pkt: Vec<u8> = (0u8..20).collect();
        for (at, v) in [
            (14usize, 14usize),
            (14, 0),
            (13, 14),
            (20, 14),
            (25, 14),
            (0, 0),
        ] {
            let (mut o1, mut o2) = (vec![], vec![]);
            let a = Payload::in_packet_vouched(&pkt, at, &mut o1, v);
            let mut b = Payload::in_packet(&pkt, at, &mut o2);
            b.vouch_prefix(v);
            assert_eq!(a.bytes(), b.bytes(), "at {at}");
            assert_eq!(a.bytes(), &pkt[at.min(20)..], "at {at}");
            for n in [0usize, 13, 14, 15] {
                assert_eq!(
                    a.prefix_vouched(n),
                    b.prefix_vouched(n),
                    "at {at}, {v}, {n}"
                );
                assert_eq!(a.prefix_vouched(n), n != 0 && n == v && at.min(20) >= n);
            }
        }
    }

    #[test]
    fn payload_replacements() {
        let pkt = [1u8, 2, 3, 4];
        let mut owned = Vec::new();
        let mut p = Payload::in_packet(&pkt, 9, &mut owned);
        assert_eq!(
            p.bytes(),
            &[] as &[u8],
            "an offset past the end is an empty payload"
        );
        let mut other = vec![5u8, 6];
        p.swap_in(&mut other);
        assert_eq!(p.bytes(), &[5, 6]);
        p.set(&[8]);
        assert_eq!(p.bytes(), &[8]);
        let mut v = vec![1u8];
        let p = Payload::owned(&mut v);
        assert!(!p.is_in_packet());
        assert_eq!(p.bytes(), &[1]);
    }

    #[test]
    fn an_owned_payload_may_start_past_the_front_of_its_buffer() {
        let pkt = [1u8, 2, 3, 4];
        let mut owned = vec![];
        let mut p = Payload::in_packet(&pkt, 1, &mut owned);
        let mut made = vec![9u8, 9, 5, 6, 7];
        p.swap_in_from(&mut made, 2);
        assert_eq!(
            (p.bytes(), p.skip(), p.is_in_packet()),
            (&[5u8, 6, 7][..], 2, false)
        );
        assert!(made.is_empty(), "the old buffer comes back");
        // a rewrite moves the payload to the front of its buffer
        p.vec_mut().push(8);
        assert_eq!((p.bytes(), p.skip()), (&[5u8, 6, 7, 8][..], 0));
        let mut again = vec![0u8, 1, 2];
        p.swap_in_from(&mut again, 7);
        assert_eq!(
            (p.bytes(), p.skip()),
            (&[] as &[u8], 3),
            "clamped to the buffer"
        );
        p.set(&[4]);
        assert_eq!((p.bytes(), p.skip()), (&[4u8][..], 0));
        // the engine hands the offset back with the buffer
        let mut buf = vec![1u8, 2, 3];
        assert_eq!(Payload::owned_from(&mut buf, 1).bytes(), &[2, 3]);
        assert_eq!(Payload::owned_from(&mut buf, 5).bytes(), &[] as &[u8]);
    }
}
