//! Side effects a pipeline pass asks for (clone, resubmit, recirculate, truncate, drop). Most
//! packets ask for none: the pipeline tests one flag per pass and looks at the effects only when it
//! is set.

/// The effects requested in the current pass. Every request sets `any`.
#[derive(Default, Clone, Copy, Debug)]
pub(crate) struct Effects {
    any: bool,
    clone_i2e: Option<(u32, Option<u32>)>,
    clone_e2e: Option<(u32, Option<u32>)>,
    resubmit: Option<Option<u32>>,
    recirculate: Option<Option<u32>>,
    truncate: Option<usize>,
    drop: bool,
}

impl Effects {
    /// Whether anything was requested.
    #[inline(always)]
    pub(crate) fn any(&self) -> bool {
        self.any
    }

    /// An ingress-to-egress clone to mirror session `session`, keeping the fields of `field_list`.
    pub(crate) fn clone_i2e(&mut self, session: u32, field_list: Option<u32>) {
        self.clone_i2e = Some((session, field_list));
        self.any = true;
    }
    /// An egress-to-egress clone.
    pub(crate) fn clone_e2e(&mut self, session: u32, field_list: Option<u32>) {
        self.clone_e2e = Some((session, field_list));
        self.any = true;
    }
    pub(crate) fn resubmit(&mut self, field_list: Option<u32>) {
        self.resubmit = Some(field_list);
        self.any = true;
    }
    pub(crate) fn recirculate(&mut self, field_list: Option<u32>) {
        self.recirculate = Some(field_list);
        self.any = true;
    }
    pub(crate) fn truncate(&mut self, length: usize) {
        self.truncate = Some(length);
        self.any = true;
    }
    /// Drop the packet at the end of this pass (an assertion failed, an extern faulted).
    pub(crate) fn drop(&mut self) {
        self.drop = true;
        self.any = true;
    }

    pub(crate) fn dropped(&self) -> bool {
        self.drop
    }
    pub(crate) fn i2e_clone(&self) -> Option<(u32, Option<u32>)> {
        self.clone_i2e
    }
    pub(crate) fn e2e_clone(&self) -> Option<(u32, Option<u32>)> {
        self.clone_e2e
    }
    pub(crate) fn resubmission(&self) -> Option<Option<u32>> {
        self.resubmit
    }
    pub(crate) fn recirculation(&self) -> Option<Option<u32>> {
        self.recirculate
    }
    pub(crate) fn truncation(&self) -> Option<usize> {
        self.truncate
    }

    /// What an egress pass starts with: truncation and recirculation requested in ingress take
    /// effect after egress (as in BMv2, where they are intrinsic metadata carried with the packet);
    /// nothing else carries over.
    pub(crate) fn for_egress(&self) -> Effects {
        Effects {
            any: self.truncate.is_some() || self.recirculate.is_some(),
            truncate: self.truncate,
            recirculate: self.recirculate,
            ..Effects::default()
        }
    }
}
