//! Where an extern argument's bits live in the engine's per-packet state, resolved when a call site
//! is compiled.
//!
//! The engine keeps every field of up to 64 bits in one machine word ("slot"), wider fields in
//! consecutive words (least significant word first). An argument whose parts are all fixed fields
//! and constants gets an [`ArgLayout`]: the argument's bytes with the constants already in place,
//! and per field its slot and where its bits go. The engine uses layouts to hand arguments over
//! without evaluating expressions; an extern that binds a call site
//! ([`crate::iface::ExternObject::bind`]) uses them to read its inputs straight from the slots and
//! write its results back, with no per-call buffers at all.

/// How one field moves between its slot words and the argument's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FieldOp {
    /// `nb` (1..=8) whole bytes at byte `at`, through the 8-byte window that starts there (`at + 8
    /// <= nbytes`): the field is the window's top `64 - sh` bits; `keep` masks the window's other
    /// bytes.
    Ahead {
        slot: u32,
        at: u32,
        sh: u32,
        keep: u64,
    },
    /// `nb` (1..=8) whole bytes that end the 8-byte window at byte `from` (`from + 8 <= nbytes`):
    /// the field is the window's bits under `m`.
    Behind { slot: u32, from: u32, m: u64 },
    /// Whole bytes in an argument too short for any window, or a field wider than 64 bits: word by
    /// word.
    Bytes { slot: u32, at: u32, nb: u32 },
    /// A field of at most 64 bits off the byte grid inside the 8-byte window at byte `at` (`at + 8
    /// <= nbytes`): the field is `(window >> sh) & m`.
    Win { slot: u32, at: u32, sh: u32, m: u64 },
    /// A narrow field off the byte grid in an argument too short for a window: its bits at bit
    /// `bit` (MSB first).
    Bits { slot: u32, bit: u32, width: u32 },
    /// A `bit<0>` field: no bytes; written back as zero.
    Empty { slot: u32 },
}

/// One part of an argument, most significant first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// A field: its first slot and its width (wider than 64 bits: consecutive slots, low word
    /// first).
    Field { slot: u32, width: u32 },
    /// A constant of at most 64 bits.
    Const { value: u64, width: u32 },
}

/// The layout of one argument's bit string (big-endian, `ceil(width/8)` bytes, unused high bits of
/// the first byte zero): see the module documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgLayout {
    width: u32,
    nbytes: usize,
    /// The argument's bytes with its constant parts in place and zeros for the fields.
    base: Vec<u8>,
    /// Whether the fields alone cover every byte (no constants, no pad bits): then `base` need not
    /// be copied.
    covered: bool,
    ops: Vec<FieldOp>,
    /// One past the last slot word the fields use.
    end_slot: usize,
    /// When the fields cover every byte and each is at most 8 whole bytes read through a window:
    /// per field (slot, window start, right shift, mask), the field being `(window >> shift) &
    /// mask`. [`ArgLayout::equals`] compares through these without matching on the field kinds.
    windows: Option<Box<[(u32, u32, u32, u64)]>>,
}

#[inline]
fn mask(w: u32) -> u64 {
    if w >= 64 {
        u64::MAX
    } else {
        (1u64 << w) - 1
    }
}

/// Read `width` (≤ 64) bits at bit offset `pos` of `data`, MSB first.
#[inline]
pub fn read_bits(data: &[u8], pos: usize, width: u32) -> u64 {
    if width == 0 {
        return 0;
    }
    let first = pos / 8;
    let off = (pos % 8) as u32;
    if first + 16 <= data.len() {
        let mut b = [0u8; 16];
        b.copy_from_slice(&data[first..first + 16]);
        let acc = u128::from_be_bytes(b);
        return ((acc >> (128 - off - width)) as u64) & mask(width);
    }
    let nbytes = ((off + width) as usize).div_ceil(8);
    let mut acc: u128 = 0;
    for i in 0..nbytes {
        acc = (acc << 8) | data[first + i] as u128;
    }
    let total = nbytes as u32 * 8;
    ((acc >> (total - off - width)) as u64) & mask(width)
}

/// OR the low `width` (at most 64) bits of `v` into `out` at bit `bit` (MSB first); the bits there
/// are zero.
fn put_bits_at(out: &mut [u8], bit: u32, width: u32, v: u64) {
    let v = v & mask(width);
    let (mut rem, mut p) = (width, bit);
    while rem > 0 {
        let off = p % 8;
        let take = (8 - off).min(rem);
        let part = ((v >> (rem - take)) & ((1u64 << take) - 1)) as u8;
        out[(p / 8) as usize] |= part << (8 - off - take);
        rem -= take;
        p += take;
    }
}

#[inline(always)]
fn window(bytes: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

#[inline(always)]
fn set_window(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// [`window`] without the bounds check.
///
/// # Safety
/// `at + 8 <= bytes.len()`.
#[inline(always)]
unsafe fn window_unchecked(bytes: &[u8], at: usize) -> u64 {
    u64::from_be(std::ptr::read_unaligned(
        bytes.as_ptr().add(at) as *const u64
    ))
}

/// [`set_window`] without the bounds check.
///
/// # Safety
/// `at + 8 <= bytes.len()`.
#[inline(always)]
unsafe fn set_window_unchecked(bytes: &mut [u8], at: usize, v: u64) {
    std::ptr::write_unaligned(bytes.as_mut_ptr().add(at) as *mut u64, v.to_be());
}

impl ArgLayout {
    /// The layout of an argument of `width` bits made of `parts`; `None` when a field wider than 64
    /// bits is off the byte grid, a constant is wider than 64 bits, or the parts do not add up to
    /// `width`.
    pub fn new(width: u32, parts: &[Part]) -> Option<ArgLayout> {
        let nbytes = width.div_ceil(8) as usize;
        let mut bit = nbytes as u32 * 8 - width;
        let mut l = ArgLayout {
            width,
            nbytes,
            base: vec![0; nbytes],
            covered: bit == 0,
            ops: Vec::with_capacity(parts.len()),
            end_slot: 0,
            windows: None,
        };
        for p in parts {
            let w = match *p {
                Part::Field { slot, width } => {
                    if width > 64 && (width % 8 != 0 || !bit.is_multiple_of(8)) {
                        return None;
                    }
                    let (at, nb) = (bit / 8, width / 8);
                    if bit + width > nbytes as u32 * 8 {
                        return None;
                    }
                    l.end_slot = l
                        .end_slot
                        .max(slot as usize + (width.div_ceil(64) as usize).max(1));
                    // the window a field off the byte grid can be moved through: the one starting
                    // at its first byte, or the argument's last 8 bytes when that one would run
                    // past the end
                    let win_at = (bit / 8).min((nbytes as u32).saturating_sub(8));
                    l.ops.push(
                        if (!bit.is_multiple_of(8) || width % 8 != 0)
                            && width > 0
                            && nbytes >= 8
                            && bit + width <= win_at * 8 + 64
                        {
                            FieldOp::Win {
                                slot,
                                at: win_at,
                                sh: win_at * 8 + 64 - bit - width,
                                m: mask(width),
                            }
                        } else if !bit.is_multiple_of(8) || width % 8 != 0 {
                            l.covered = false;
                            FieldOp::Bits { slot, bit, width }
                        } else if nb == 0 {
                            FieldOp::Empty { slot }
                        } else if nb <= 8 && at as usize + 8 <= nbytes {
                            FieldOp::Ahead {
                                slot,
                                at,
                                sh: 64 - 8 * nb,
                                keep: if nb == 8 { 0 } else { u64::MAX >> (8 * nb) },
                            }
                        } else if nb <= 8 && at + nb >= 8 {
                            FieldOp::Behind {
                                slot,
                                from: at + nb - 8,
                                m: mask(8 * nb),
                            }
                        } else {
                            FieldOp::Bytes { slot, at, nb }
                        },
                    );
                    width
                }
                Part::Const { value, width } => {
                    if width > 64 || bit + width > nbytes as u32 * 8 {
                        return None;
                    }
                    l.covered = false;
                    put_bits_at(&mut l.base, bit, width, value);
                    width
                }
            };
            bit += w;
        }
        if l.covered {
            // every field through windows (a wide field of whole words: one window per word, low
            // word last)
            let mut ws = Vec::with_capacity(l.ops.len());
            let all = l.ops.iter().all(|op| match *op {
                FieldOp::Ahead { slot, at, sh, .. } => {
                    ws.push((slot, at, sh, u64::MAX));
                    true
                }
                FieldOp::Behind { slot, from, m } => {
                    ws.push((slot, from, 0, m));
                    true
                }
                FieldOp::Win { slot, at, sh, m } => {
                    ws.push((slot, at, sh, m));
                    true
                }
                FieldOp::Bytes { slot, at, nb } if nb % 8 == 0 => {
                    ws.extend((0..nb / 8).map(|k| (slot + k, at + nb - 8 * (k + 1), 0, u64::MAX)));
                    true
                }
                _ => false,
            });
            l.windows = all.then(|| ws.into_boxed_slice());
        }
        (bit as usize == nbytes * 8).then_some(l)
    }

    /// Width of the argument in bits.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Length of the argument's bit string in bytes.
    pub fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// The argument's bytes when it is made of constants only (e.g. an algorithm selector).
    pub fn constant(&self) -> Option<&[u8]> {
        self.ops.is_empty().then_some(&self.base[..])
    }

    /// The first slot of the one field the argument is, when it is exactly one field of whole bytes
    /// (no constants, no pad bits): a `bit<64>` result, a `bit<128>` key (low word first).
    pub fn single_field(&self) -> Option<u32> {
        match self.ops[..] {
            [FieldOp::Ahead { slot, .. }
            | FieldOp::Behind { slot, .. }
            | FieldOp::Bytes { slot, .. }]
                if self.covered =>
            {
                Some(slot)
            }
            _ => None,
        }
    }

    /// Whether `bytes` is what [`ArgLayout::read`] would write for these slots (the argument's
    /// current value), compared field by field without writing it out.
    #[inline]
    pub fn equals(&self, slots: &[u64], bytes: &[u8]) -> bool {
        if bytes.len() != self.nbytes || slots.len() < self.end_slot {
            return false;
        }
        if let Some(ws) = &self.windows {
            // SAFETY: every window lies inside `nbytes` (`Ahead`/`Behind`), which is `bytes.len()`,
            // and every slot is below `end_slot` <= slots.len(), both checked above
            return ws.iter().all(|&(slot, at, sh, m)| unsafe {
                (window_unchecked(bytes, at as usize) >> sh) & m
                    == *slots.get_unchecked(slot as usize)
            });
        }
        if !self.covered {
            // constants or pad bits: compare the whole string
            let mut buf = [0u8; 128];
            return match buf.get_mut(..self.nbytes) {
                Some(b) => {
                    self.read(slots, b);
                    b == bytes
                }
                None => {
                    let mut v = vec![0u8; self.nbytes];
                    self.read(slots, &mut v);
                    v == bytes
                }
            };
        }
        for op in &self.ops {
            let same = match *op {
                // SAFETY: as in `read` (windows inside `nbytes`, which is `bytes.len()`, checked
                // above; slots below `end_slot`, checked above)
                FieldOp::Ahead { slot, at, sh, .. } => unsafe {
                    window_unchecked(bytes, at as usize) >> sh
                        == *slots.get_unchecked(slot as usize)
                },
                FieldOp::Behind { slot, from, m } => unsafe {
                    window_unchecked(bytes, from as usize) & m
                        == *slots.get_unchecked(slot as usize)
                },
                FieldOp::Win { slot, at, sh, m } => unsafe {
                    (window_unchecked(bytes, at as usize) >> sh) & m
                        == *slots.get_unchecked(slot as usize) & m
                },
                FieldOp::Bytes { slot, at, nb } => {
                    let (nb, mut end) = (nb as usize, (at + nb) as usize);
                    (0..nb.div_ceil(8)).all(|k| {
                        let take = (nb - 8 * k).min(8);
                        let v = bytes[end - take..end]
                            .iter()
                            .fold(0u64, |x, &y| (x << 8) | y as u64);
                        end -= take;
                        v == slots[slot as usize + k]
                    })
                }
                FieldOp::Bits { slot, bit, width } => {
                    read_bits(bytes, bit as usize, width) == slots[slot as usize] & mask(width)
                }
                FieldOp::Empty { .. } => true,
            };
            if !same {
                return false;
            }
        }
        true
    }

    /// Write the argument's bytes into `out`, which is [`ArgLayout::nbytes`] long.
    ///
    /// # Panics
    /// When `out` has another length or `slots` does not hold every field.
    #[inline(always)]
    pub fn read(&self, slots: &[u64], out: &mut [u8]) {
        assert!(
            out.len() == self.nbytes && slots.len() >= self.end_slot,
            "argument buffers do not fit the layout"
        );
        if let Some(ws) = &self.windows {
            // every byte is some field's (`covered`): each field into its window, the window's
            // other bits kept
            for &(slot, at, sh, m) in ws.iter() {
                // SAFETY: every window lies inside `nbytes` and every slot below `end_slot`
                // (`new`), both checked against the buffers above
                unsafe {
                    let at = at as usize;
                    let v = ((*slots.get_unchecked(slot as usize) & m) << sh)
                        | (window_unchecked(out, at) & !(m << sh));
                    set_window_unchecked(out, at, v);
                }
            }
            return;
        }
        if !self.covered {
            if self.nbytes == 1 {
                // a narrow constant such as an algorithm selector: no memcpy call
                out[0] = self.base[0];
            } else {
                out.copy_from_slice(&self.base);
            }
        }
        for op in &self.ops {
            // SAFETY (all `unsafe` below): `new` placed every window and byte range inside
            // `nbytes`, and every slot below `end_slot`; the assertion above checked both lengths.
            match *op {
                // the field's bytes first (or last) in the window, the window's other bytes kept
                FieldOp::Ahead { slot, at, sh, keep } => unsafe {
                    let at = at as usize;
                    let v = (*slots.get_unchecked(slot as usize) << sh)
                        | (window_unchecked(out, at) & keep);
                    set_window_unchecked(out, at, v);
                },
                FieldOp::Behind { slot, from, m } => unsafe {
                    let from = from as usize;
                    let v = (*slots.get_unchecked(slot as usize) & m)
                        | (window_unchecked(out, from) & !m);
                    set_window_unchecked(out, from, v);
                },
                FieldOp::Win { slot, at, sh, m } => unsafe {
                    let at = at as usize;
                    let v = ((*slots.get_unchecked(slot as usize) & m) << sh)
                        | (window_unchecked(out, at) & !(m << sh));
                    set_window_unchecked(out, at, v);
                },
                FieldOp::Bytes { slot, at, nb } => {
                    let (nb, mut end) = (nb as usize, (at + nb) as usize);
                    for k in 0..nb.div_ceil(8) {
                        let take = (nb - 8 * k).min(8);
                        if take == 8 {
                            // a whole word: one 8-byte store
                            set_window(out, end - 8, slots[slot as usize + k]);
                        } else {
                            let x = slots[slot as usize + k].to_be_bytes();
                            out[end - take..end].copy_from_slice(&x[8 - take..]);
                        }
                        end -= take;
                    }
                }
                FieldOp::Bits { slot, bit, width } => {
                    put_bits_at(out, bit, width, slots[slot as usize])
                }
                FieldOp::Empty { .. } => {}
            }
        }
    }

    /// Fill `out` with the argument's bytes (zeros only, when `value` is false: an `out` argument),
    /// resizing it to [`ArgLayout::nbytes`].
    #[inline(always)]
    pub fn marshal(&self, slots: &[u64], value: bool, out: &mut Vec<u8>) {
        if out.len() != self.nbytes {
            out.clear();
            out.resize(self.nbytes, 0);
        }
        if !value {
            out.fill(0);
            return;
        }
        self.read(slots, out);
    }

    /// Split the argument's bytes back into the fields' slots (nothing happens when `bytes` does
    /// not have the argument's length; an extern that resized an argument is a fault the engine
    /// reports).
    #[inline(always)]
    ///
    /// # Panics
    /// When `slots` does not hold every field.
    pub fn write(&self, bytes: &[u8], slots: &mut [u64]) {
        if bytes.len() != self.nbytes {
            return;
        }
        assert!(
            slots.len() >= self.end_slot,
            "slots do not hold the layout's fields"
        );
        if let Some(ws) = &self.windows {
            for &(slot, at, sh, m) in ws.iter() {
                // SAFETY: as in `read`
                unsafe {
                    *slots.get_unchecked_mut(slot as usize) =
                        (window_unchecked(bytes, at as usize) >> sh) & m
                }
            }
            return;
        }
        for op in &self.ops {
            // SAFETY: as in `read`
            match *op {
                FieldOp::Ahead { slot, at, sh, .. } => unsafe {
                    *slots.get_unchecked_mut(slot as usize) =
                        window_unchecked(bytes, at as usize) >> sh
                },
                FieldOp::Behind { slot, from, m } => unsafe {
                    *slots.get_unchecked_mut(slot as usize) =
                        window_unchecked(bytes, from as usize) & m
                },
                FieldOp::Win { slot, at, sh, m } => unsafe {
                    *slots.get_unchecked_mut(slot as usize) =
                        (window_unchecked(bytes, at as usize) >> sh) & m
                },
                FieldOp::Bytes { slot, at, nb } => {
                    let (nb, mut end) = (nb as usize, (at + nb) as usize);
                    for k in 0..nb.div_ceil(8) {
                        let take = (nb - 8 * k).min(8);
                        slots[slot as usize + k] = if take == 8 {
                            window(bytes, end - 8)
                        } else {
                            bytes[end - take..end]
                                .iter()
                                .fold(0u64, |x, &y| (x << 8) | y as u64)
                        };
                        end -= take;
                    }
                }
                FieldOp::Bits { slot, bit, width } => {
                    slots[slot as usize] = read_bits(bytes, bit as usize, width) & mask(width)
                }
                FieldOp::Empty { slot } => slots[slot as usize] = 0,
            }
        }
    }
}

impl ArgLayout {
    /// What [`ArgLayout::write`] of all-zero bytes does, without the bytes: every field's slots set
    /// to zero.
    ///
    /// # Panics
    /// When `slots` does not hold every field.
    #[inline]
    pub fn clear(&self, slots: &mut [u64]) {
        assert!(
            slots.len() >= self.end_slot,
            "slots do not hold the layout's fields"
        );
        for op in &self.ops {
            match *op {
                FieldOp::Ahead { slot, .. }
                | FieldOp::Behind { slot, .. }
                | FieldOp::Win { slot, .. }
                | FieldOp::Bits { slot, .. }
                | FieldOp::Empty { slot } => slots[slot as usize] = 0,
                FieldOp::Bytes { slot, nb, .. } => {
                    slots[slot as usize..slot as usize + nb.div_ceil(8) as usize].fill(0)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
