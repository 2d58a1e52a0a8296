//! The write plan of an action's inline arguments ([`ArgPlan`]), fixed when the engine is built
//! and used by every one-key apply that takes a hit's arguments from its hot line.

use crate::tables::INLINE_ARGS;

/// The write plan of an action's inline arguments (a hit's words held in its hot line), fixed
/// when the engine is built: the slot and mask of each of the action's parameter words, padded to
/// [`INLINE_ARGS`] with writes of nothing (mask 0) into the worker's sink slot, so that a hit
/// writes all of them unconditionally. `words` is the number of the action's parameter words:
/// the plan applies to a hot line holding exactly that many (any other count, or an action whose
/// parameters take more than [`INLINE_ARGS`] words, takes the per-word loop).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ArgPlan {
    pub(crate) slots: [u32; INLINE_ARGS],
    pub(crate) masks: [u64; INLINE_ARGS],
    pub(crate) words: u8,
}

impl ArgPlan {
    /// The plan of an action whose parameter words are `words` (as [`super::param_word_layout`] gives
    /// them, slots already clamped to the program's and its sink slot `sink`).
    pub(crate) fn of(words: &[(u32, u64, u32, u32)], sink: u32) -> ArgPlan {
        let mut p = ArgPlan {
            slots: [sink; INLINE_ARGS],
            masks: [0; INLINE_ARGS],
            // more words than fit: a count no hot line holds (neither inline nor `NOT_INLINE`), so
            // the plan never applies
            words: (INLINE_ARGS + 1) as u8,
        };
        if words.len() <= INLINE_ARGS {
            p.words = words.len() as u8;
            for (i, &(s, m, _, _)) in words.iter().enumerate() {
                p.slots[i] = s;
                p.masks[i] = m;
            }
        }
        p
    }

    /// A hot line's inline argument words into the parameters: every write of the plan made
    /// (padding ones write zero into the sink slot). The caller checked the hot line holds
    /// [`ArgPlan::words`] words.
    #[inline(always)]
    pub(crate) fn write(&self, slots: &mut [u64], args: &[u64; INLINE_ARGS]) {
        for ((&s, &a), &m) in self.slots.iter().zip(args).zip(&self.masks) {
            let s = s as usize;
            debug_assert!(s < slots.len());
            // SAFETY: a plan holds only the program's slots and the sink slot after them, all of
            // which the worker has (checked on entry to `Engine::process`)
            unsafe { *slots.get_unchecked_mut(s) = a & m };
        }
    }
}
