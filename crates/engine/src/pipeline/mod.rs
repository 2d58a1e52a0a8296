//! The v1model pipeline: one input frame through parser, verify, ingress, the packet replication
//! engine, egress, compute and deparser, with the clones, resubmissions, recirculations and
//! multicast copies it causes run as further passes.

pub(crate) mod call;
pub(crate) mod effects;
pub(crate) mod exec;
pub(crate) mod headers;
pub(crate) mod lane;
pub(crate) mod match_action;
pub(crate) mod parser;
pub(crate) mod stage_run;
pub mod tm;

use crate::bits::BitWriter;
use crate::code::Flow;
use crate::engine::CBlock;
use crate::pipeline::effects::Effects;
use crate::pipeline::headers::settle_checksums;
use crate::pipeline::stage_run::{Blocks, Fused, StageRun};
use crate::tm::{QueueMeta, Queued};
use crate::worker::Job;
use crate::{bump, Engine, Outputs, Worker, NOT_IN_PKT, NO_OFFSET};
use p4sec_ir::*;
use std::sync::atomic::Ordering;

/// The drop port of v1model.
pub const DROP_PORT: u64 = 511;
/// Bound on resubmit/recirculate/clone passes caused by one input packet: a guard against programs
/// that never stop recirculating, high enough for programs that recirculate once per payload byte
/// (DeeP4R-style scanning of a 1500-byte packet with the original waiting alongside takes about
/// 3000 passes).
pub const MAX_PASSES: u32 = 8192;

// `put` and `get` run only inside `Engine::process`, which checks on entry that the worker's slots
// are `Program::slots + 1` words: every `StdSlots` index is below that.
#[inline(always)]
fn put(slots: &mut [u64], (s, m): (usize, u64), v: u64) {
    debug_assert!(s < slots.len());
    // SAFETY: see above
    unsafe { *slots.get_unchecked_mut(s) = v & m }
}

#[inline(always)]
fn get(slots: &[u64], (s, m): (usize, u64)) -> u64 {
    debug_assert!(s < slots.len());
    // SAFETY: see above
    unsafe { *slots.get_unchecked(s) & m }
}

impl Engine {
    // ------------------------------------------------------------ the v1model pipeline

    /// Process one frame received on `in_port`, with every copy, resubmission and recirculation it
    /// causes.
    pub fn process(&self, w: &mut Worker, in_port: u32, frame: &[u8], out: &mut Outputs) {
        if let Some(l) = &self.controls.lane {
            if l.takes(self, w) {
                (l.run)(self, w, in_port, frame, out);
                return;
            }
        }
        self.general_frame(w, in_port, frame, out);
    }

    /// [`Engine::process`] off the lane (`pipeline/lane.rs`).
    #[inline(never)]
    pub(crate) fn general_frame(
        &self,
        w: &mut Worker,
        in_port: u32,
        frame: &[u8],
        out: &mut Outputs,
    ) {
        // the standard metadata slots (`StdSlots`) are read and written unchecked below this point
        assert_eq!(
            w.slots.len(),
            self.prog.slots as usize + 1,
            "a worker of another engine"
        );
        if self.match_action.version.load(Ordering::Acquire) != w.tables.version {
            std::hint::cold_path();
            self.refresh_tables(w);
        }
        bump(&w.stats.packets_in);
        if !w.jobs.queue.is_empty() {
            std::hint::cold_path();
            w.jobs.queue.clear();
        }
        self.ingress_pass(w, frame, in_port, 0, &[], out);
        if !w.jobs.queue.is_empty() {
            std::hint::cold_path();
            self.run_jobs(w, out);
        }
        // `frame` ends here
        w.packet.pkt.reset();
        if self.layout.std.tm_any {
            w.tm.tick();
        }
    }

    /// The egress pass of a packet that waited in a queue (a [`Queued`] item this engine's ingress
    /// left in a worker in queueing mode), with what its stay was; then the copies, resubmissions
    /// and recirculations it causes (their packets bound for egress are queued in turn). An item of
    /// another engine (the pipeline was replaced while it waited) is dropped.
    pub fn egress(&self, w: &mut Worker, item: Queued, meta: QueueMeta, out: &mut Outputs) {
        if w.slots.len() != item.slots.len() || w.slots.len() != self.prog.slots as usize + 1 {
            bump(&w.stats.dropped);
            return;
        }
        if self.match_action.version.load(Ordering::Acquire) != w.tables.version {
            self.refresh_tables(w);
        }
        w.jobs.queue.clear();
        w.packet.pkt.reset();
        for &h in &self.controls.tracked_headers {
            w.packet.hdr_off[h] = NO_OFFSET;
        }
        w.slots.copy_from_slice(&item.slots);
        w.jobs.spare.words.give(item.slots);
        let old = std::mem::replace(&mut w.packet.payload, item.payload);
        w.jobs.spare.bytes.give(old);
        w.packet.payload_at = NOT_IN_PKT;
        w.packet.payload_skip = 0;
        w.packet.len = item.pkt_len;
        w.fx = item.fx;
        w.tm.meta = meta;
        self.egress_pass(w, item.port, item.rid, item.itype, out, &mut Blocks);
        if !w.jobs.queue.is_empty() {
            self.run_jobs(w, out);
        }
    }

    /// Queueing mode: the packet, at the end of ingress (or a copy made for egress), is kept for
    /// the traffic manager instead of going through egress now.
    #[cold]
    #[inline(never)]
    fn enqueue(&self, w: &mut Worker, port: u32, rid: u32, itype: u32) {
        w.own_payload();
        let priority = get(&w.slots, self.layout.std.priority) as u8;
        let fx = w.fx;
        let (slots, payload) = (
            w.jobs.spare.words.copy_of(&w.slots),
            w.jobs.spare.bytes.copy_of(&w.packet.payload),
        );
        w.tm.queued.push(Queued {
            port,
            priority,
            slots,
            payload,
            pkt_len: w.packet.len,
            rid,
            itype,
            fx,
        });
    }

    /// The traffic manager's fields of an egress pass: the queue's (inline: the packet "entered the
    /// queue" at its ingress time, and found it empty) and the egress time.
    #[cold]
    #[inline(never)]
    fn put_queue_fields(&self, w: &mut Worker) {
        let ss = &self.layout.std;
        let m = w.tm.meta;
        put(&mut w.slots, ss.enq_timestamp, m.enq_timestamp);
        put(&mut w.slots, ss.enq_qdepth, m.enq_qdepth as u64);
        put(&mut w.slots, ss.deq_timedelta, m.deq_timedelta as u64);
        put(&mut w.slots, ss.deq_qdepth, m.deq_qdepth as u64);
        if ss.tm.clock {
            let now = w.tm.now();
            put(&mut w.slots, ss.egress_ts, now);
        }
    }

    /// The tracked headers' recorded offsets cleared (`Worker::hdr_off`): nothing may take their
    /// fields from the packet's bytes any more in this pass.
    #[cold]
    fn forget_offsets(&self, w: &mut Worker) {
        for &h in &self.controls.tracked_headers {
            w.packet.hdr_off[h] = NO_OFFSET;
        }
    }

    /// The copies, resubmissions and recirculations a frame caused, in order.
    #[cold]
    #[inline(never)]
    fn run_jobs(&self, w: &mut Worker, out: &mut Outputs) {
        let mut passes = 0u32;
        while let Some(job) = w.jobs.queue.pop_front() {
            passes += 1;
            if passes > MAX_PASSES {
                bump(&w.stats.pass_limit);
                w.jobs.queue.clear();
                break;
            }
            match job {
                Job::Ingress {
                    bytes,
                    port,
                    itype,
                    preserved,
                } => {
                    self.ingress_pass(w, &bytes, port, itype, &preserved, out);
                    // the job's bytes end here
                    w.packet.pkt.reset();
                    w.jobs.spare.bytes.give(bytes);
                    w.jobs.spare.fields.give(preserved);
                }
                Job::Egress {
                    slots,
                    mut payload,
                    pkt_len,
                    port,
                    rid,
                    itype,
                } => {
                    if w.tm.queueing {
                        let priority = get(&slots, self.layout.std.priority) as u8;
                        w.tm.queued.push(Queued {
                            port,
                            priority,
                            slots,
                            payload,
                            pkt_len,
                            rid,
                            itype,
                            fx: w.fx.for_egress(),
                        });
                        continue;
                    }
                    w.slots.copy_from_slice(&slots);
                    // the job's payload becomes the worker's (no copy); the worker's buffer goes to
                    // the spares
                    std::mem::swap(&mut w.packet.payload, &mut payload);
                    w.jobs.spare.words.give(slots);
                    w.jobs.spare.bytes.give(payload);
                    w.packet.payload_at = NOT_IN_PKT;
                    w.packet.payload_skip = 0;
                    w.packet.len = pkt_len;
                    // the saved state's headers may not be the bytes at the worker's offsets
                    // (another pass may have parsed since)
                    self.forget_offsets(w);
                    self.egress_pass(w, port, rid, itype, out, &mut Blocks);
                }
            }
        }
    }

    fn set(&self, w: &mut Worker, l: Loc, v: u64) {
        if l.width > 0 {
            self.store(w, l, v);
        }
    }
    fn get(&self, w: &Worker, l: Loc) -> u64 {
        if l.width > 0 {
            self.load(w, l)
        } else {
            0
        }
    }

    /// The slots of field list `field_list` and their values now (in a buffer of `w.jobs.spare`).
    fn preserved(&self, w: &mut Worker, field_list: Option<u32>) -> Vec<(u32, u64)> {
        let mut v = w.jobs.spare.fields.take();
        if let Some(id) = field_list {
            if let Some(fl) = self.prog.field_lists.iter().find(|f| f.id == id) {
                for l in &fl.fields {
                    for k in 0..words_for(l.width) {
                        v.push((l.slot + k, w.slots[(l.slot + k) as usize]));
                    }
                }
            }
        }
        v
    }

    #[inline(always)]
    fn ingress_pass(
        &self,
        w: &mut Worker,
        bytes: &[u8],
        port: u32,
        itype: u32,
        preserved: &[(u32, u64)],
        out: &mut Outputs,
    ) {
        // SAFETY: `bytes` outlives the pass, and `Engine::process` resets the view before it
        // returns
        unsafe { w.packet.pkt.set(bytes) };
        w.packet.len = bytes.len();
        w.packet.cursor = 0;
        w.perr = 0;
        w.loop_steps = 0;
        if w.fx.any() {
            w.fx = Effects::default();
        }
        let ss = &self.layout.std;
        if let Some(pass) = &self.controls.native.pass {
            if let Some(f) = pass.front {
                // (a program using the traffic manager's fields has no front)
                if w.initial_zero && preserved.is_empty() {
                    // the generated front resets the rest (slots, tracked headers' offsets,
                    // standard metadata) and runs the parser, verify and ingress
                    if !f.zeroes {
                        w.slots.fill(0);
                    }
                    if let Some(cx) = crate::native::PassCx::fresh(pass, self, w) {
                        let r = &mut Fused {
                            pass,
                            cx,
                            fresh: Some(f.f),
                        };
                        self.ingress_stages(w, port, itype, out, r);
                        return;
                    }
                }
            }
        }
        if w.initial_zero {
            w.slots.fill(0);
        } else {
            w.slots.copy_from_slice(&w.initial);
        }
        for &h in &self.controls.tracked_headers {
            w.packet.hdr_off[h] = NO_OFFSET;
        }
        put(&mut w.slots, ss.ingress_port, port as u64);
        put(&mut w.slots, ss.instance_type, itype as u64);
        put(&mut w.slots, ss.packet_length, bytes.len() as u64);
        for (s, v) in preserved {
            w.slots[*s as usize] = *v;
        }
        if ss.tm_any {
            std::hint::cold_path();
            self.ingress_time(w);
        }
        if let Some(pass) = &self.controls.native.pass {
            if let Some(cx) = crate::native::PassCx::new(pass, self, w) {
                // every stage native: one context for the whole pass
                let r = &mut Fused {
                    pass,
                    cx,
                    fresh: None,
                };
                self.ingress_stages(w, port, itype, out, r);
                return;
            }
        }
        self.ingress_stages(w, port, itype, out, &mut Blocks);
    }

    /// The stages of an ingress pass, from the parser on, run by `r`, and the egress pass it
    /// leads to.
    #[inline(always)]
    fn ingress_stages<R: StageRun>(
        &self,
        w: &mut Worker,
        port: u32,
        itype: u32,
        out: &mut Outputs,
        r: &mut R,
    ) {
        let ss = &self.layout.std;
        r.front(self, w, port, itype);
        if w.fx.any() {
            if w.fx.dropped() {
                self.drop_packet(w, "dropped in ingress");
                return;
            }
            // 1. ingress-to-egress clone, 3. resubmit (nothing else is sent)
            if (w.fx.i2e_clone().is_some() || w.fx.resubmission().is_some())
                && self.ingress_effects(w, port)
            {
                return;
            }
        }
        // 4. multicast
        let grp = get(&w.slots, ss.mcast_grp) as u32;
        if grp != 0 {
            self.multicast(w, grp);
            return;
        }
        // 5. drop or unicast
        let spec = get(&w.slots, ss.egress_spec);
        if spec == DROP_PORT {
            self.drop_packet(w, "egress_spec is the drop port");
            return;
        }
        if w.tm.queueing {
            std::hint::cold_path();
            self.enqueue(w, spec as u32, 0, itype);
            return;
        }
        self.egress_pass(w, spec as u32, 0, itype, out, r);
    }

    /// `ingress_global_timestamp`, and the queue fields an inline egress pass will see.
    #[cold]
    #[inline(never)]
    fn ingress_time(&self, w: &mut Worker) {
        let now = if self.layout.std.tm.clock {
            w.tm.now()
        } else {
            0
        };
        put(&mut w.slots, self.layout.std.ingress_ts, now);
        w.tm.ingress_ts = now;
        w.tm.meta = QueueMeta {
            enq_timestamp: now,
            ..QueueMeta::default()
        };
    }

    /// An ingress-to-egress clone (the original bytes, parsed again, metadata reset except the
    /// field list) and a resubmission the ingress asked for; true when the packet was resubmitted
    /// (nothing else is sent).
    #[cold]
    #[inline(never)]
    fn ingress_effects(&self, w: &mut Worker, port: u32) -> bool {
        let sm = &self.prog.std_meta;
        let fx = w.fx;
        if let Some((session, fl)) = fx.i2e_clone() {
            if let Some(&cport) = self.replication.config.load().mirror.get(&session) {
                let keep = self.preserved(w, fl);
                w.own_payload();
                // the packet's state is kept aside while the clone's is built in the worker
                // (buffers from `w.jobs.spare`: nothing is allocated once the worker has made a few
                // clones)
                let saved_slots = w.jobs.spare.words.copy_of(&w.slots);
                let empty = w.jobs.spare.bytes.take();
                let saved = (
                    saved_slots,
                    std::mem::replace(&mut w.packet.payload, empty),
                    w.packet.len,
                );
                // re-parse the original input in a scratch pass to build the clone's state
                let original_len = w.packet.pkt.len();
                w.slots.copy_from_slice(&w.initial);
                w.packet.cursor = 0;
                self.set(w, sm.ingress_port, port as u64);
                self.set(w, sm.packet_length, original_len as u64);
                for (s, v) in &keep {
                    w.slots[*s as usize] = *v;
                }
                w.jobs.spare.fields.give(keep);
                self.run_parser(w);
                // the packet's own headers are no longer the bytes at the offsets the clone's
                // parse recorded (its field list may have led the parser elsewhere)
                self.forget_offsets(w);
                self.set(w, sm.parser_error, 0);
                w.own_payload();
                let clone_slots = std::mem::replace(&mut w.slots, saved.0);
                let clone_payload = std::mem::replace(&mut w.packet.payload, saved.1);
                w.jobs.queue.push_back(Job::Egress {
                    slots: clone_slots,
                    payload: clone_payload,
                    pkt_len: original_len,
                    port: cport,
                    rid: 0,
                    itype: 1,
                });
                w.packet.payload_at = NOT_IN_PKT;
                w.packet.payload_skip = 0;
                w.packet.len = saved.2;
            }
        }
        if let Some(fl) = fx.resubmission() {
            let keep = self.preserved(w, fl);
            let bytes = w.jobs.spare.bytes.copy_of(&w.packet.pkt);
            w.jobs.queue.push_back(Job::Ingress {
                bytes,
                port,
                itype: 6,
                preserved: keep,
            });
            return true;
        }
        false
    }

    /// One copy of the packet per port of multicast group `grp`, each to its egress pass.
    #[cold]
    #[inline(never)]
    fn multicast(&self, w: &mut Worker, grp: u32) {
        w.own_payload();
        let pre = self.replication.config.load();
        if let Some(nodes) = pre.groups.get(&grp) {
            for h in nodes {
                if let Some(Some((rid, ports))) = pre.nodes.get(*h as usize) {
                    for p in ports {
                        let (slots, payload) = (
                            w.jobs.spare.words.copy_of(&w.slots),
                            w.jobs.spare.bytes.copy_of(&w.packet.payload),
                        );
                        w.jobs.queue.push_back(Job::Egress {
                            slots,
                            payload,
                            pkt_len: w.packet.len,
                            port: *p,
                            rid: *rid,
                            itype: 5,
                        });
                    }
                }
            }
        }
    }

    /// A stage: its native function called directly when it has one and the worker can take it,
    /// its block otherwise (the flow, ignored, as in [`Engine::run_block`]).
    #[inline(always)]
    pub(crate) fn run_stage(
        &self,
        w: &mut Worker,
        b: &CBlock,
        native: Option<crate::native::stages::Stage>,
    ) {
        if let Some(s) = native {
            if crate::native::enter(s, self, w).is_some() {
                w.perr = 0;
                return;
            }
        }
        self.run_block(w, b);
    }

    #[inline(always)]
    pub(crate) fn run_block(&self, w: &mut Worker, b: &CBlock) {
        if b.is_empty() {
            return;
        }
        match b.run(self, w) {
            Flow::Reject(_) | Flow::Next | Flow::Exit | Flow::Break(_) => {}
        }
        w.perr = 0;
    }

    /// Before the deparser: the output buffer lent to `w.emit.out` (given back once the frame is
    /// complete), the bit writer empty; where the frame starts in the buffer.
    #[inline(always)]
    pub(crate) fn deparser_start(&self, w: &mut Worker, out: &mut Outputs) -> usize {
        std::mem::swap(&mut w.emit.out, &mut out.data);
        w.emit.bw = BitWriter::default();
        w.emit.out.len()
    }

    #[cold]
    #[inline(never)]
    fn drop_packet(&self, w: &mut Worker, why: &str) {
        bump(&w.stats.dropped);
        if let Some(t) = w.trace.as_mut() {
            std::hint::cold_path();
            t.push(format!("drop: {why}"));
        }
    }

    #[inline(always)]
    fn egress_pass<R: StageRun>(
        &self,
        w: &mut Worker,
        port: u32,
        rid: u32,
        itype: u32,
        out: &mut Outputs,
        r: &mut R,
    ) {
        let ss = &self.layout.std;
        // one borrow of the slots for the four writes (their buffer's address read once)
        let slots = w.slots.as_mut_slice();
        put(slots, ss.egress_port, port as u64);
        put(slots, ss.egress_spec, 0);
        put(slots, ss.egress_rid, rid as u64);
        put(slots, ss.instance_type, itype as u64);
        if ss.tm_any {
            std::hint::cold_path();
            self.put_queue_fields(w);
        }
        if w.fx.any() {
            w.fx = w.fx.for_egress();
        }
        if let Some(t) = w.trace.as_mut() {
            std::hint::cold_path();
            t.push(format!("egress (port {port}, instance_type {itype})"));
        }
        let egress_ran = r.egress(self, w);
        self.after_egress(w, port, egress_ran, out, r);
    }

    /// The egress pass after the egress control (`egress_ran`: it had code): the effects it asked
    /// for, then compute and the deparser ([`StageRun::back`]) and the frame out.
    #[inline(always)]
    fn after_egress<R: StageRun>(
        &self,
        w: &mut Worker,
        port: u32,
        egress_ran: bool,
        out: &mut Outputs,
        r: &mut R,
    ) {
        let ss = &self.layout.std;
        let (mut truncate, mut recirculate) = (None, None);
        if w.fx.any() {
            if w.fx.dropped() {
                self.drop_packet(w, "dropped in egress");
                return;
            }
            (truncate, recirculate) = (w.fx.truncation(), w.fx.recirculation());
            if let Some((session, fl)) = w.fx.e2e_clone() {
                self.clone_e2e(w, session, fl);
            }
        }
        // (egress_spec is 0 unless an egress control ran)
        if egress_ran && get(&w.slots, ss.egress_spec) == DROP_PORT {
            self.drop_packet(w, "marked to drop in egress");
            return;
        }
        w.emit.csum_pending = 0;
        // compute, deparser: headers and payload are appended straight to the output buffer
        let start = r.back(self, w, out);
        self.frame_out(w, port, start, (truncate, recirculate), out);
    }

    /// The end of an egress pass after the deparser (which appended the headers to `w.emit.out`,
    /// holding the output buffer, from `start`): checksums still due, the payload, the truncation
    /// and recirculation asked for, the frame out.
    #[inline(always)]
    fn frame_out(
        &self,
        w: &mut Worker,
        port: u32,
        mut start: usize,
        (truncate, recirculate): (Option<usize>, Option<Option<u32>>),
        out: &mut Outputs,
    ) {
        if w.emit.csum_pending != 0 {
            settle_checksums(self, w);
        }
        if w.emit.bw.n != 0 {
            // a deparser that ended off a byte boundary: the last byte padded
            std::hint::cold_path();
            let mut bw = w.emit.bw;
            bw.finish(&mut w.emit.out);
            w.emit.bw = bw;
        }
        let hl = w.emit.out.len() - start;
        if w.packet.payload_at != NOT_IN_PKT {
            // the payload is still in the input frame
            let pkt = &w.packet.pkt;
            w.emit
                .out
                .extend_from_slice(&pkt[w.packet.payload_at.min(pkt.len())..]);
        } else if start == 0
            && recirculate.is_none()
            && hl <= w.packet.payload_skip
            && w.packet.payload_skip <= w.packet.payload.len()
        {
            // the payload's buffer has room in front of the payload for the headers just emitted
            // (an extern left it there: `Payload::swap_in_from`): the headers go there and that
            // buffer becomes the output buffer, the payload not copied again; the frame starts past
            // the room left over
            start = w.packet.payload_skip - hl;
            w.packet.payload[start..w.packet.payload_skip].copy_from_slice(&w.emit.out[..hl]);
            std::mem::swap(&mut w.emit.out, &mut w.packet.payload);
            // (the old output buffer: the payload is not read again in this pass)
            w.packet.payload.clear();
            w.packet.payload_skip = 0;
        } else {
            let payload = &w.packet.payload;
            w.emit
                .out
                .extend_from_slice(&payload[w.packet.payload_skip.min(payload.len())..]);
        }
        if let Some(n) = truncate {
            w.emit.out.truncate(start + n);
        }
        if let Some(fl) = recirculate {
            self.recirculate(w, start, fl, out);
            return;
        }
        std::mem::swap(&mut w.emit.out, &mut out.data);
        bump(&w.stats.packets_out);
        if let Some(t) = w.trace.as_mut() {
            std::hint::cold_path();
            t.push(format!(
                "emit {} bytes on port {port}",
                out.data.len() - start
            ));
        }
        out.frames.push((port, start..out.data.len()));
    }

    /// An egress-to-egress clone: the headers as they are now, metadata reset except the field
    /// list.
    #[cold]
    #[inline(never)]
    fn clone_e2e(&self, w: &mut Worker, session: u32, fl: Option<u32>) {
        let Some(&cport) = self.replication.config.load().mirror.get(&session) else {
            return;
        };
        w.own_payload();
        let keep = self.preserved(w, fl);
        let mut slots = w.jobs.spare.words.copy_of(&w.initial);
        for &(s, n) in &self.layout.header_ranges {
            slots[s..s + n].copy_from_slice(&w.slots[s..s + n]);
        }
        for &(s, v) in &keep {
            slots[s as usize] = v;
        }
        w.jobs.spare.fields.give(keep);
        let ip = self.prog.std_meta.ingress_port;
        if ip.width > 0 {
            slots[ip.slot as usize] = w.slots[ip.slot as usize];
        }
        let payload = w.jobs.spare.bytes.copy_of(&w.packet.payload);
        w.jobs.queue.push_back(Job::Egress {
            slots,
            payload,
            pkt_len: w.packet.len,
            port: cport,
            rid: 0,
            itype: 2,
        });
    }

    /// The deparsed packet (in `w.emit.out` from `start`, while `w.emit.out` holds the output buffer) goes
    /// back to the parser instead of out.
    #[cold]
    #[inline(never)]
    fn recirculate(&self, w: &mut Worker, start: usize, fl: Option<u32>, out: &mut Outputs) {
        let bytes = w.jobs.spare.bytes.copy_of(&w.emit.out[start..]);
        w.emit.out.truncate(start);
        std::mem::swap(&mut w.emit.out, &mut out.data);
        let keep = self.preserved(w, fl);
        let ip = self.get(w, self.prog.std_meta.ingress_port) as u32;
        w.jobs.queue.push_back(Job::Ingress {
            bytes,
            port: ip,
            itype: 4,
            preserved: keep,
        });
    }

    /// Take one consistent view of every table (a sequence lock: the version is odd while a
    /// publication is in progress, and a view is kept only if the version did not move while it was
    /// taken).
    #[cold]
    fn refresh_tables(&self, w: &mut Worker) {
        loop {
            let v = self.match_action.version.load(Ordering::Acquire);
            if v & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            for (snap, rt) in w.tables.snapshots.iter_mut().zip(&self.match_action.tables) {
                *snap = Some(rt.data.load_full());
            }
            if self.match_action.version.load(Ordering::Acquire) == v {
                w.tables.version = v;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
