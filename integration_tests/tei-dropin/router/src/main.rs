//! The router of the TEI-shaped workspace, reduced to a check that needs no environment: it feeds
//! the core's queue random requests that share prefixes, takes the batches the queue planned with
//! `radix_mlp::compute_fold_and_scatter`, and checks every batch against the naive reference
//! planner (naive.rs): the maps, the padding rows (token 0, position 0, gather 0, up to the
//! multiple, 8192 included), and the gate's decision as TEI's rule makes it, which the library's
//! own `Gate::Tei` must make too. Exits non-zero (a panic) at the first difference.
mod naive;

use radix_mlp::{Gate, PlanParams, Planner};
use tei_dropin_core::{Batch, Entry, Queue, QueueConfig};

use naive::naive_plan;

const PADS: [Option<usize>; 5] = [None, Some(1), Some(8), Some(64), Some(8192)];
const THRESHOLDS: [f32; 4] = [1.0, 0.85, 0.5, 0.0];

/// xorshift64*: reproducible batches without a dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u32) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32 % n
    }
}

/// A request: one of a few shared leading prefixes (an instruction, a query), cut somewhere, then
/// a tail over a small vocabulary, so paths meet, part and meet again; positions from 0, as TEI's
/// tokenizer gives them.
fn random_entry(rng: &mut Rng, prefixes: &[Vec<u32>]) -> Entry {
    let prefix = &prefixes[rng.below(prefixes.len() as u32) as usize];
    let mut ids: Vec<u32> = prefix[..rng.below(prefix.len() as u32 + 1) as usize].to_vec();
    let vocab = 2 + rng.below(4);
    for _ in 0..1 + rng.below(24) {
        ids.push(rng.below(vocab));
    }
    Entry { position_ids: (0..ids.len() as u32).collect(), input_ids: ids }
}

/// TEI's gate on the reference's compact length: the maps are kept iff the threshold is above
/// 1e-6 and is at least 1 or above the padded length over the batch length (in `f32`).
fn tei_keeps(threshold: f32, padded: usize, n_tokens: usize) -> bool {
    threshold > 1e-6 && (threshold >= 1.0 || (padded as f32 / n_tokens as f32) < threshold)
}

/// Checks one batch; returns its number of distinct paths.
fn check(batch: &Batch, pad: Option<usize>, threshold: f32, planner: &mut Planner, what: &str) -> usize {
    let (ids, pos, cu) = (&batch.input_ids, &batch.position_ids, &batch.cumulative_seq_lengths);
    let want = naive_plan(ids, pos, cu);
    let n = want.compact_ids.len();
    let padded = n.next_multiple_of(pad.unwrap_or(1));
    let keeps = tei_keeps(threshold, padded, ids.len());
    let maps = [&batch.compact_input_ids, &batch.compact_position_ids, &batch.scatter_unfold, &batch.fold_gather];
    assert!(
        maps.iter().all(|m| m.is_some() == keeps),
        "{what}: maps kept {}, TEI's gate says {keeps}",
        maps[0].is_some()
    );
    if let Some(multiple) = pad.filter(|&m| m <= 4096) {
        let params =
            PlanParams { threshold: threshold as f64, pad_multiple_of: Some(multiple as u32), gate: Gate::Tei };
        let plan = planner.build(ids, pos, cu, &params).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(plan.use_radix(), keeps, "{what}: the library's Gate::Tei differs from TEI's rule");
    }
    if !keeps {
        return n;
    }
    let tail = |v: &[u32]| v[n..].iter().all(|&x| x == 0);
    for (name, got, reference) in [
        ("compact_input_ids", &batch.compact_input_ids, &want.compact_ids),
        ("compact_position_ids", &batch.compact_position_ids, &want.compact_pos),
        ("fold_gather", &batch.fold_gather, &want.fold_gather),
    ] {
        let got = got.as_ref().unwrap();
        assert_eq!(got.len(), padded, "{what}: {name} has {} rows, want {n} padded to {padded}", got.len());
        assert_eq!(&got[..n], &reference[..], "{what}: {name}");
        assert!(tail(got), "{what}: {name}'s padding rows are not 0");
    }
    assert_eq!(batch.scatter_unfold.as_ref().unwrap(), &want.scatter, "{what}: scatter");
    n
}

fn main() {
    let (mut batches, mut tokens, mut compact, mut kept) = (0usize, 0usize, 0usize, 0usize);
    let mut planner = Planner::new().expect("a planner");
    for (p, pad) in PADS.into_iter().enumerate() {
        for (t, threshold) in THRESHOLDS.into_iter().enumerate() {
            let mut rng = Rng(0x7E1_0000 + (p * 16 + t) as u64); // never 0, xorshift's fixed point
            let prefixes: Vec<Vec<u32>> = (0..3).map(|_| (0..rng.below(20)).map(|_| rng.below(5)).collect()).collect();
            let config = QueueConfig {
                max_batch_tokens: 256,
                max_batch_requests: if t % 2 == 0 { Some(12) } else { None },
                radix_mlp_threshold: threshold,
                radix_mlp_pad: pad,
            };
            let queue = Queue::new(config);
            for _ in 0..120 {
                queue.append(random_entry(&mut rng, &prefixes));
            }
            let mut k = 0;
            while let Some(batch) = queue.next_batch() {
                let what = format!("pad {pad:?}, threshold {threshold}, batch {k}");
                compact += check(&batch, pad, threshold, &mut planner, &what);
                batches += 1;
                tokens += batch.input_ids.len();
                kept += batch.scatter_unfold.is_some() as usize;
                k += 1;
            }
        }
    }
    assert!(kept > 0 && kept < batches, "the gate kept the maps of {kept} of {batches} batches: not a test of it");
    println!(
        "tei-dropin: {batches} batches ({tokens} tokens, {compact} distinct paths) planned by the queue through \
         radix_mlp {}: maps equal the naive reference at pads None, 1, 8, 64 and 8192; the gate kept {kept} as \
         TEI's rule does",
        radix_mlp::version_string()
    );
}
