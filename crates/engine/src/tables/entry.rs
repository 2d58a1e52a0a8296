//! One installed entry ([`Installed`]: its match, action, counters, direct meter, idle state and
//! action profile reference), the part of it a hit reads ([`Hot`]), and what an entry of a table
//! with an action profile or selector refers to ([`Indirect`]).

use p4sec_ir::{ActionCall, TableEntry};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One installed entry with its per-entry direct counter.
#[derive(Debug)]
pub(crate) struct Installed {
    pub entry: TableEntry,
    /// Insertion sequence number: among equal priorities the earlier entry wins.
    pub seq: u64,
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// Per-entry meter configuration (direct meters): (cir, cbs, pir, pbs) and its state.
    pub meter: Option<Arc<crate::meters::MeterCell>>,
    /// The action arguments as machine words held in the entry itself, when all of them together
    /// take at most [`INLINE_ARGS`] words (saves following a pointer per argument on every hit).
    pub inline_args: Option<([u64; INLINE_ARGS], u8)>,
    /// Entries of tables with an action profile or selector: the member, group or action set the
    /// entry refers to (the entry's `action` is a member's action; groups and action sets choose
    /// per packet).
    pub indirect: Option<Arc<Indirect>>,
    /// Idle timeout (tables with `support_timeout`): 0 for none.
    pub idle_timeout_ns: u64,
    /// When the entry was last hit ([`crate::coarse_ms`]; its insertion until the first hit).
    /// Written only for tables with `support_timeout`.
    pub last_hit: AtomicU64,
    /// The `last_hit` for which the controller was told the entry is idle (`u64::MAX`: not told):
    /// it is told once per idle period.
    pub idle_notified: AtomicU64,
}

pub(crate) const INLINE_ARGS: usize = 3;

/// The slot words a call of a table's default action writes (`TableData::default_writes`), set by
/// the engine whenever a version is published (`match_action::param_writes`).
#[derive(Clone, Debug, Default)]
pub(crate) struct DefaultWrites {
    /// Every (slot, word) write, padded to a multiple of four with writes of zero into the
    /// worker's sink slot.
    pub all: Vec<(u32, u64)>,
    /// The same writes when there are at most [`INLINE_ARGS`] of them (`few` set), padded with
    /// writes of zero into the sink slot: a miss of the lean apply writes these three, no loop.
    pub inline: [(u32, u64); INLINE_ARGS],
    pub few: bool,
}

/// What a hit needs from an entry: the action and its arguments when they are held inline. Kept
/// contiguously beside the entries ([`Hot`], one cache line per hit instead of following the
/// entry's pointer) and, for a narrow LPM table, in its levels' slots beside the key (a hit reads
/// it with the key's own slot, not after it).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub(crate) struct HotData {
    pub action: u32,
    /// Number of inline argument words (all the arguments' words, in parameter order, low words
    /// first), or [`Hot::NOT_INLINE`] when the entry's `action.args` must be used or the entry
    /// `selects`.
    pub nargs: u8,
    /// The entry refers to an action profile group or action set (the action is chosen per packet).
    pub selects: bool,
    pub args: [u64; INLINE_ARGS],
}

/// [`HotData`] aligned to its own half cache line (never split between two lines).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
pub(crate) struct Hot(pub HotData);

impl std::ops::Deref for Hot {
    type Target = HotData;
    #[inline(always)]
    fn deref(&self) -> &HotData {
        &self.0
    }
}

impl HotData {
    /// The hit's action and argument count in one word, as a narrow LPM table's hit maps hold it
    /// beside the arguments: the action in the low 24 bits, the count (or [`Hot::NOT_INLINE`])
    /// above. An entry that selects its action per packet, or of an action of 2^24 - 1 or more,
    /// has action 0 and count `NOT_INLINE` (a count no action's plan has: the lean apply leaves
    /// it to the general one). Never `u32::MAX` (a free slot's).
    pub(crate) fn code(&self) -> u32 {
        if self.selects || self.action >= (1 << 24) - 1 {
            return (Hot::NOT_INLINE as u32) << 24;
        }
        (self.nargs as u32) << 24 | self.action
    }

    /// The action and argument count of a [`HotData::code`].
    #[inline(always)]
    pub(crate) fn decode(code: u32) -> (usize, u8) {
        ((code & 0xff_ffff) as usize, (code >> 24) as u8)
    }
}

impl Hot {
    pub const NOT_INLINE: u8 = u8::MAX;
    pub(super) fn of(e: &Installed) -> Hot {
        let (args, nargs) = e.inline_args.unwrap_or(([0; INLINE_ARGS], Hot::NOT_INLINE));
        let selects = e.indirect.as_deref().is_some_and(Indirect::selects);
        Hot(HotData {
            action: e.entry.action.action,
            // an entry that selects its action per packet holds no arguments to write: its count
            // never equals an action's (the lean apply tests only the count on its hot path)
            nargs: if selects { Hot::NOT_INLINE } else { nargs },
            selects,
            args,
        })
    }
}

/// What an entry of a table implemented by an action profile or selector refers to (P4Runtime's
/// `TableAction`): an action profile member, a group of members, or a one-shot action set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProfileRef {
    Member(u32),
    Group(u32),
    ActionSet,
}

/// An indirect entry's reference and, for groups and action sets, the weighted actions a packet
/// chooses from by the hash of the table's selector keys.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Indirect {
    pub reference: ProfileRef,
    /// (action, weight); empty for members (and for empty groups, which behave as a table miss).
    pub choices: Vec<(ActionCall, u32)>,
    /// Running sums of the weights.
    ends: Vec<u64>,
}

impl Indirect {
    pub fn new(reference: ProfileRef, choices: Vec<(ActionCall, u32)>) -> Indirect {
        let mut sum = 0u64;
        let ends = choices
            .iter()
            .map(|(_, w)| {
                sum += (*w).max(1) as u64;
                sum
            })
            .collect();
        Indirect {
            reference,
            choices,
            ends,
        }
    }
    /// Does a packet choose among `choices` (groups and action sets), rather than run the entry's
    /// action?
    #[inline]
    pub fn selects(&self) -> bool {
        !matches!(self.reference, ProfileRef::Member(_))
    }
    /// The action chosen by hash value `h` (weighted); `None` for an empty group.
    #[inline]
    pub fn pick(&self, h: u64) -> Option<&ActionCall> {
        let total = *self.ends.last()?;
        let x = h % total;
        let i = self.ends.partition_point(|e| *e <= x);
        self.choices.get(i).map(|(a, _)| a)
    }
}

impl Installed {
    /// Take over the idle-timeout state of the entry this one replaces.
    pub(super) fn keep_idle_state(&mut self, old: &Installed) {
        self.idle_timeout_ns = old.idle_timeout_ns;
        self.last_hit = AtomicU64::new(old.last_hit.load(Ordering::Relaxed));
        self.idle_notified = AtomicU64::new(old.idle_notified.load(Ordering::Relaxed));
    }
    pub fn new(
        entry: TableEntry,
        seq: u64,
        packets: u64,
        bytes: u64,
        meter: Option<Arc<crate::meters::MeterCell>>,
    ) -> Installed {
        let args = &entry.action.args;
        // the arguments' words in the order of the action's parameter words (`param_word_layout`):
        // each argument in turn, low words first
        let nwords: usize = args
            .iter()
            .map(|v| p4sec_ir::words_for(v.width) as usize)
            .sum();
        let inline_args = (nwords <= INLINE_ARGS).then(|| {
            let mut a = [0u64; INLINE_ARGS];
            let words = args.iter().flat_map(|v| {
                (0..p4sec_ir::words_for(v.width) as usize)
                    .map(|k| v.words.get(k).copied().unwrap_or(0))
            });
            for (x, wd) in a.iter_mut().zip(words) {
                *x = wd;
            }
            (a, nwords as u8)
        });
        Installed {
            entry,
            seq,
            packets: AtomicU64::new(packets),
            bytes: AtomicU64::new(bytes),
            meter,
            inline_args,
            indirect: None,
            idle_timeout_ns: 0,
            last_hit: AtomicU64::new(crate::coarse_ms()),
            idle_notified: AtomicU64::new(u64::MAX),
        }
    }
}

impl Clone for Installed {
    fn clone(&self) -> Self {
        let mut c = Installed::new(
            self.entry.clone(),
            self.seq,
            self.packets.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
            self.meter.clone(),
        );
        c.indirect = self.indirect.clone();
        c.keep_idle_state(self);
        c
    }
}

/// A meter cell configured with `rates` (a direct meter's state for one entry).
pub(super) fn meter_cell(
    rates: Option<crate::meters::MeterRates>,
) -> Arc<crate::meters::MeterCell> {
    let cell = Arc::new(crate::meters::MeterCell::default());
    cell.configure(rates);
    cell
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_pick() {
        let a = |x: u32| ActionCall {
            action: x,
            args: vec![],
        };
        let ind = Indirect::new(ProfileRef::Group(1), vec![(a(1), 1), (a(2), 3)]);
        let picks: Vec<u32> = (0..8).map(|h| ind.pick(h).unwrap().action).collect();
        assert_eq!(picks, [1, 2, 2, 2, 1, 2, 2, 2]);
        assert!(Indirect::new(ProfileRef::Group(1), vec![])
            .pick(5)
            .is_none());
    }
}
