//! The data thread of `p4sec bench-mixed`: batches of k ESP packets in every 16 made through the
//! peer A (not timed) and sent through the measured B (timed), every output checked, tallied.

use super::gateways::{ESP_SRC, PLAIN_SRC};
use super::rekey::Shared;
use p4sec_engine::{Engine, Outputs, Worker};
use std::sync::atomic::Ordering::SeqCst;
use std::time::Instant;

pub(super) const BATCH: usize = 512;
/// Offset of the (tunnel, sequence) marker in an inner frame: Ethernet + IPv4 + UDP.
const MARK: usize = 14 + 20 + 8;

/// An inner frame of `size` bytes (Ethernet + IPv4 + UDP), from `src` to 10.2.t.7, the marker left
/// zero.
fn template(size: usize, src: [u8; 4], t: u32) -> Vec<u8> {
    let mut f = vec![0u8; size];
    f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0x11]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (size - 14) as u16;
    let mut h = [
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 0, 0, 0, 0, 10, 2, t as u8, 7,
    ];
    h[2..4].copy_from_slice(&ip_len.to_be_bytes());
    h[12..16].copy_from_slice(&src);
    let c = p4sec_engine::hash::csum16(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f[14..34].copy_from_slice(&h);
    f[34..36].copy_from_slice(&(1000 + t as u16).to_be_bytes());
    f[36..38].copy_from_slice(&4242u16.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

#[derive(Default, Clone, Copy)]
pub(super) struct Tally {
    pub(super) packets: u64,
    pub(super) esp_in: u64,
    pub(super) esp_ok: u64,
    pub(super) plain_in: u64,
    pub(super) plain_ok: u64,
    pub(super) bytes_out: u64,
    pub(super) bytes_in: u64,
    pub(super) secs: f64,
    /// the data thread's CPU time in the timed part (from /proc/thread-self/schedstat; 0 where
    /// unavailable)
    pub(super) cpu: f64,
}

/// This thread's CPU time so far (ns on a CPU, from the scheduler's statistics), if the kernel
/// reports it.
fn thread_cpu() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(s.split_whitespace().next()?.parse::<f64>().ok()? / 1e9)
}

/// The data thread: batches with k of every 16 packets ESP (positions drawn at random in each group
/// of 16), through A (not timed) then B (timed), until `seconds` of B's time have been measured.
#[allow(clippy::too_many_arguments)]
pub(super) fn traffic(
    a: &Engine,
    b: &Engine,
    size: usize,
    k: u32,
    tunnels: u32,
    seconds: f64,
    sh: &Shared,
    seq: &mut [u32],
    rng: &mut u64,
) -> Result<Tally, String> {
    let esp_t: Vec<Vec<u8>> = (0..tunnels).map(|t| template(size, ESP_SRC, t)).collect();
    let plain_t: Vec<Vec<u8>> = (0..tunnels).map(|t| template(size, PLAIN_SRC, t)).collect();
    let (mut wa, mut wb) = (Worker::new(a), Worker::new(b));
    let (mut oa, mut ob) = (Outputs::default(), Outputs::default());
    let mut batch = Outputs::default();
    let mut expect: Vec<(bool, u32, u32)> = Vec::with_capacity(BATCH);
    let mut tally = Tally::default();
    let mut inner = vec![0u8; size];
    let mut next_t = 0u32;
    let mut group = [false; 16];
    while tally.secs < seconds {
        sh.started.fetch_add(1, SeqCst);
        batch.clear();
        expect.clear();
        for j in 0..BATCH {
            if j % 16 == 0 {
                // k ESP positions among the next 16, drawn at random
                group = [false; 16];
                let mut idx: [usize; 16] = std::array::from_fn(|i| i);
                for i in (1..16).rev() {
                    *rng ^= *rng << 13;
                    *rng ^= *rng >> 7;
                    *rng ^= *rng << 17;
                    idx.swap(i, (*rng % (i as u64 + 1)) as usize);
                }
                for &p in &idx[..k as usize] {
                    group[p] = true;
                }
            }
            let t = next_t;
            next_t = (next_t + 1) % tunnels;
            let esp = group[j % 16];
            let s = seq[t as usize];
            seq[t as usize] = s.wrapping_add(1);
            let tpl = if esp {
                &esp_t[t as usize]
            } else {
                &plain_t[t as usize]
            };
            inner.copy_from_slice(tpl);
            inner[MARK..MARK + 2].copy_from_slice(&(t as u16).to_be_bytes());
            inner[MARK + 2..MARK + 6].copy_from_slice(&s.to_be_bytes());
            if esp {
                oa.clear();
                a.process(&mut wa, 1, &inner, &mut oa);
                match oa.iter().next() {
                    Some((2, f)) if f.len() > 14 + 20 && f[14 + 9] == 50 => batch.push(2, f),
                    _ => {
                        return Err(format!(
                            "the peer gateway did not encrypt a packet of tunnel {t}"
                        ))
                    }
                }
            } else {
                batch.push(2, &inner);
            }
            expect.push((esp, t, s));
        }
        // B, timed: every output checked (port, length, tunnel and sequence marker, source)
        let c0 = thread_cpu();
        let t0 = Instant::now();
        for (i, (_, f)) in batch.iter().enumerate() {
            ob.clear();
            b.process(&mut wb, 2, f, &mut ob);
            let (esp, t, s) = expect[i];
            let ok = match ob.frames.first() {
                Some((1, r)) => {
                    let o = &ob.data[r.clone()];
                    o.len() == size
                        && o[MARK..MARK + 2] == (t as u16).to_be_bytes()
                        && o[MARK + 2..MARK + 6] == s.to_be_bytes()
                        && o[26..30] == if esp { ESP_SRC } else { PLAIN_SRC }
                }
                _ => false,
            };
            if esp {
                tally.esp_in += 1;
                tally.esp_ok += ok as u64;
            } else {
                tally.plain_in += 1;
                tally.plain_ok += ok as u64;
            }
            tally.bytes_in += f.len() as u64;
            tally.bytes_out += if ok { size as u64 } else { 0 };
        }
        tally.secs += t0.elapsed().as_secs_f64();
        if let (Some(c0), Some(c1)) = (c0, thread_cpu()) {
            tally.cpu += c1 - c0;
        }
        tally.packets += BATCH as u64;
        sh.done.fetch_add(1, SeqCst);
    }
    Ok(tally)
}
