//! The general way of passing an extern argument: its parts evaluated and packed into a bit string
//! ([`Engine::marshal_arg`]), and an `out`/`inout` argument's bit string split back into its
//! destinations ([`Engine::write_back_arg`]), for arguments load time could not plan.

use crate::bits::{read_wide, BitWriter};
use crate::{Engine, Worker};
use p4sec_externs::iface::BitBuf;
use p4sec_externs::layout::read_bits;
use p4sec_ir::*;

impl Engine {
    /// Append the bits of `e` (MSB first) through the bit writer `bw`.
    #[inline]
    fn put_expr(&self, w: &mut Worker, e: &Expr, buf: &mut Vec<u8>, bw: &mut BitWriter) {
        if let Expr::Load(LValue::Static(l)) = e {
            if l.width % 8 == 0 && bw.n.is_multiple_of(8) {
                // whole bytes at a byte boundary (header fields, addresses): the slot words' bytes,
                // MSB first
                bw.finish(buf);
                let nb = (l.width / 8) as usize;
                for k in (0..words_for(l.width) as usize).rev() {
                    let x = w.slots[l.slot as usize + k].to_be_bytes();
                    let take = (nb - 8 * k).min(8);
                    buf.extend_from_slice(&x[8 - take..]);
                }
                return;
            }
            if l.width <= 64 {
                bw.put(buf, w.slots[l.slot as usize], l.width);
                return;
            }
        }
        let width = e.width();
        if width <= 64 {
            let v = self.eval(w, e);
            bw.put(buf, v, width);
        } else {
            let v = self.eval_wide(w, e);
            bw.put_wide(buf, &v, width);
        }
    }
    #[inline(never)]
    /// Marshal argument `a` into `b` the general way: each part evaluated and packed bit by bit.
    pub(crate) fn marshal_arg(&self, w: &mut Worker, a: &ExternArg, b: &mut BitBuf) {
        // the value right-aligned in whole bytes: leading pad bits, then the parts, MSB first
        let nbytes = a.width.div_ceil(8) as usize;
        let mut tmp = std::mem::take(&mut b.bytes);
        tmp.clear();
        if a.dir == Direction::Out {
            // nothing goes in: zeros
            tmp.resize(nbytes, 0);
            b.bytes = tmp;
            return;
        }
        let mut bw = BitWriter::default();
        bw.put(&mut tmp, 0, nbytes as u32 * 8 - a.width);
        for e in &a.parts {
            self.put_expr(w, e, &mut tmp, &mut bw);
        }
        bw.finish(&mut tmp);
        tmp.resize(nbytes, 0);
        b.bytes = tmp;
    }

    /// Split an `out`/`inout` argument's bit string back into its destinations, the general way.
    pub(crate) fn write_back_arg(&self, w: &mut Worker, a: &ExternArg, b: &BitBuf) {
        let nbytes = a.width.div_ceil(8) as usize;
        let mut pos = nbytes * 8 - a.width as usize;
        for d in &a.dsts {
            let Some(l) = self.resolve(w, d) else {
                continue;
            };
            if pos.is_multiple_of(8) && l.width % 8 == 0 {
                // whole bytes at a byte boundary: straight into the slot words (least significant
                // first)
                let nb = (l.width / 8) as usize;
                let bytes = &b.bytes[pos / 8..pos / 8 + nb];
                for k in 0..words_for(l.width) as usize {
                    let end = nb - 8 * k;
                    let x = match bytes[end.saturating_sub(8)..end].try_into() {
                        Ok(b8) => u64::from_be_bytes(b8),
                        Err(_) => bytes[..end].iter().fold(0u64, |x, &y| (x << 8) | y as u64),
                    };
                    w.slots[l.slot as usize + k] = x;
                }
                pos += l.width as usize;
                continue;
            }
            self.store_bits(w, l, &b.bytes, pos);
            pos += l.width as usize;
        }
    }

    /// Store the `l.width` bits of `bytes` from bit `pos` (MSB first) into `l`.
    pub(super) fn store_bits(&self, w: &mut Worker, l: Loc, bytes: &[u8], pos: usize) {
        if l.width <= 64 {
            let v = read_bits(bytes, pos, l.width);
            self.store(w, l, v);
        } else {
            let v = read_wide(bytes, pos, l.width);
            self.store_wide(w, l, &v);
        }
    }
}
