//! The prefix KV cache through the Rust API (`ContextParams::cache_bytes`), on qwen3_tiny: over
//! reranker-like batches (one query, then passages) that share, repeat and extend earlier ones, a
//! context with a cache gives the forward outputs of one without (1e-5 relative to the largest
//! value), for the borrowing and the `Arc` context; the counters show the hits of repeated
//! prefixes; clearing empties the cache; the host-attention forwards are refused; a budget
//! smaller than one batch runs every batch without the cache, with no error, and one a little
//! larger than a batch evicts.
mod common;

use std::sync::Arc;

use common::{max_abs_diff, Fixture};
use radix_mlp::{CacheStats, Context, ContextParams, Model, ModelHolder, Plan, PlanParams, Planner, Status};

const MAX_TOKENS: usize = 512;

/// A batch of `query` followed by each passage, positions 0.. per sequence.
fn batch(query: &[u32], passages: &[Vec<u32>]) -> Plan {
    let (mut ids, mut pos, mut cu) = (Vec::new(), Vec::new(), vec![0u32]);
    for p in passages {
        let seq: Vec<u32> = query.iter().chain(p).copied().collect();
        pos.extend(0..seq.len() as u32);
        ids.extend(seq);
        cu.push(ids.len() as u32);
    }
    Planner::new().unwrap().build(&ids, &pos, &cu, &PlanParams::default()).unwrap().to_owned()
}

/// `n` passages of 3 to 9 tokens from a tiny LCG (ids 100..999), deterministic in `seed`.
fn passages(seed: u32, n: usize) -> Vec<Vec<u32>> {
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    let mut next = move |m: u32| {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (x >> 8) % m
    };
    (0..n).map(|_| (0..3 + next(7)).map(|_| 100 + next(900)).collect()).collect()
}

/// The trace: two queries with their passages, a batch repeated, one extending a cached path,
/// one sharing nothing; the last repeats the first.
fn trace() -> Vec<Plan> {
    let q1: Vec<u32> = (1..=12).collect();
    let q2: Vec<u32> = (20..=29).collect();
    let first = passages(1, 4);
    let mut longer = first.clone(); // extends the first batch's paths
    longer.iter_mut().for_each(|p| p.extend([7, 8, 9]));
    vec![
        batch(&q1, &first),
        batch(&q1, &passages(2, 5)),
        batch(&q1, &first), // a repeat: every row is a hit
        batch(&q2, &passages(3, 4)),
        batch(&q1, &longer),
        batch(&[], &passages(4, 6)),
        batch(&q1, &first),
    ]
}

fn relative_diff(got: &[f32], want: &[f32]) -> f32 {
    max_abs_diff(got, want) / want.iter().fold(0.0f32, |m, x| m.max(x.abs()))
}

fn params(cache_bytes: u64) -> ContextParams {
    ContextParams { cache_bytes, ..ContextParams::default() }
}

/// Batch rows of every plan from a context without a cache.
fn cold_outputs(model: &Model, plans: &[Plan]) -> Vec<Vec<f32>> {
    let mut ctx = model.context(MAX_TOKENS).unwrap();
    assert_eq!(ctx.cache_stats().unwrap(), CacheStats::default(), "no cache, no counters");
    let h = model.config().hidden_size;
    plans
        .iter()
        .map(|plan| {
            let mut out = vec![0.0; plan.n_tokens * h];
            ctx.forward(plan, &mut out).unwrap();
            out
        })
        .collect()
}

/// Runs every plan through `ctx` (`forward`, and `forward_compact` read through `scatter` for the
/// fourth), checks each output against `cold` and returns the counters after each batch.
fn run_trace<M: ModelHolder>(ctx: &mut Context<'_, M>, plans: &[Plan], cold: &[Vec<f32>]) -> Vec<CacheStats> {
    let h = cold[0].len() / plans[0].n_tokens;
    let mut seen = Vec::new();
    for (b, (plan, want)) in plans.iter().zip(cold).enumerate() {
        let mut got = vec![f32::NAN; plan.n_tokens * h];
        if b == 3 {
            let mut compact = vec![f32::NAN; plan.n_compact_padded * h];
            ctx.forward_compact(plan, &mut compact).unwrap();
            got = plan.scatter.iter().flat_map(|&r| &compact[r as usize * h..][..h]).copied().collect();
        } else {
            ctx.forward(plan, &mut got).unwrap();
        }
        let diff = relative_diff(&got, want);
        assert!(diff <= 1e-5, "batch {b}: with a cache vs without differ by {diff} relative");
        let stats = ctx.cache_stats().unwrap();
        assert_eq!(stats.batches, b as u64 + 1, "batch {b}: {stats:?}");
        assert_eq!(stats.hit_tokens + stats.computed_tokens, stats.lookups, "batch {b}: {stats:?}");
        assert!(stats.slots_used <= stats.slots, "batch {b}: {stats:?}");
        assert_eq!(stats.bytes_in_use, stats.slots_used * stats.bytes_per_slot, "batch {b}: {stats:?}");
        seen.push(stats);
    }
    seen
}

/// The counters of batch `b` alone: (looked up, hit, computed, bypassed).
fn delta(seen: &[CacheStats], b: usize) -> (u64, u64, u64, u64) {
    let zero = CacheStats::default();
    let (now, before) = (&seen[b], if b == 0 { &zero } else { &seen[b - 1] });
    (
        now.lookups - before.lookups,
        now.hit_tokens - before.hit_tokens,
        now.computed_tokens - before.computed_tokens,
        now.bypassed - before.bypassed,
    )
}

/// A cache holding the whole trace: outputs as without it, hits where batches repeat, clear.
fn check_large_cache<M: ModelHolder>(ctx: &mut Context<'_, M>, plans: &[Plan], cold: &[Vec<f32>], budget: u64) {
    let seen = run_trace(ctx, plans, cold);
    let last = seen.last().unwrap();
    assert_eq!(last.bytes_budget, budget, "{last:?}");
    assert!(last.bytes_per_slot > 0 && last.slots == budget / last.bytes_per_slot, "{last:?}");
    assert_eq!((last.bypassed, last.evicted_tokens), (0, 0), "the trace fits: {last:?}");
    let n_compact = |b: usize| plans[b].n_compact as u64;
    assert_eq!(delta(&seen, 0), (n_compact(0), 0, n_compact(0), 0), "a cold cache computes every row");
    let (looked, hit, _, _) = delta(&seen, 1);
    assert!(looked == n_compact(1) && hit >= 12, "the second batch reuses the 12-token query: {:?}", delta(&seen, 1));
    assert_eq!(delta(&seen, 2), (n_compact(2), n_compact(2), 0, 0), "a repeated batch is all hits");
    let (_, hit, computed, _) = delta(&seen, 4);
    assert!(hit >= n_compact(0) && computed > 0, "an extending batch reuses the cached paths: {:?}", delta(&seen, 4));
    assert_eq!(delta(&seen, 5).1, 0, "a batch sharing nothing hits nothing");
    assert_eq!(delta(&seen, 6), (n_compact(6), n_compact(6), 0, 0), "still cached at the end");
    assert_eq!(last.slots_used, last.computed_tokens, "nothing evicted: every computed row holds a slot");

    ctx.cache_clear().unwrap();
    let cleared = ctx.cache_stats().unwrap();
    assert_eq!((cleared.slots_used, cleared.bytes_in_use), (0, 0), "clear empties the cache: {cleared:?}");
    assert_eq!(
        (cleared.batches, cleared.lookups, cleared.hit_tokens),
        (last.batches, last.lookups, last.hit_tokens),
        "clear keeps the counters"
    );
    let h = cold[0].len() / plans[0].n_tokens;
    let mut out = vec![f32::NAN; plans[0].n_tokens * h];
    ctx.forward(&plans[0], &mut out).unwrap();
    assert!(relative_diff(&out, &cold[0]) <= 1e-5, "after clear");
    let after = ctx.cache_stats().unwrap();
    assert_eq!(after.hit_tokens, cleared.hit_tokens, "after clear the first batch hits nothing");
    assert_eq!(after.slots_used, n_compact(0), "and is cached again");
}

#[test]
fn cached_context_matches_uncached_and_counts_hits() {
    let f = Fixture::load("qwen3_tiny");
    let plans = trace();
    let model = Model::load(&f.dir).unwrap();
    let cold = cold_outputs(&model, &plans);
    let budget = 8 << 20;
    let mut ctx = model.context_with(MAX_TOKENS, params(budget)).unwrap();
    check_large_cache(&mut ctx, &plans, &cold, budget);
    drop(ctx);

    // The same through a context holding an Arc of its model.
    let model = Arc::new(model);
    let mut shared = Context::new_with(Arc::clone(&model), MAX_TOKENS, params(budget)).unwrap();
    check_large_cache(&mut shared, &plans, &cold, budget);
}

#[test]
fn small_budgets_bypass_or_evict() {
    let f = Fixture::load("qwen3_tiny");
    let plans = trace();
    let model = Arc::new(Model::load(&f.dir).unwrap());
    let cold = cold_outputs(&model, &plans);
    let slot = model.context_with(MAX_TOKENS, params(1 << 20)).unwrap().cache_stats().unwrap().bytes_per_slot;
    let smallest = plans.iter().map(|p| p.n_compact as u64).min().unwrap();
    assert!(smallest > 3, "every batch needs more than 3 slots");
    for budget in [1, slot / 2, 3 * slot] {
        let mut ctx = Context::new_with(Arc::clone(&model), MAX_TOKENS, params(budget)).unwrap();
        let seen = run_trace(&mut ctx, &plans, &cold);
        let last = seen.last().unwrap();
        assert_eq!(last.slots, budget / slot, "{last:?}");
        assert_eq!(last.bypassed, plans.len() as u64, "budget {budget}: every batch bypassed: {last:?}");
        assert_eq!((last.hit_tokens, last.slots_used), (0, 0), "budget {budget}: {last:?}");
    }
    // Larger than any batch, smaller than the trace: eviction makes room, nothing is bypassed.
    let largest = plans.iter().map(|p| p.n_compact as u64).max().unwrap();
    let total: u64 = plans.iter().map(|p| p.n_compact as u64).sum();
    let budget = (largest + 5) * slot;
    assert!(largest + 5 < total / 2);
    let mut ctx = Context::new_with(Arc::clone(&model), MAX_TOKENS, params(budget)).unwrap();
    let last = *run_trace(&mut ctx, &plans, &cold).last().unwrap();
    assert!(last.bypassed == 0 && last.evicted_tokens > 0 && last.hit_tokens > 0, "budget {budget}: {last:?}");
}

#[test]
fn host_attention_is_refused_on_a_cached_context() {
    let f = Fixture::load("qwen3_tiny");
    let plans = trace();
    let model = Model::load(&f.dir).unwrap();
    let h = model.config().hidden_size;
    let mut ctx = model.context_with(MAX_TOKENS, params(1 << 20)).unwrap();
    let plan = &plans[0];
    let mut calls = 0;
    let mut attention = |_: &mut radix_mlp::AttentionArgs<'_>| -> Result<(), radix_mlp::Error> {
        calls += 1;
        Ok(())
    };
    let mut out = vec![0.0; plan.n_tokens * h];
    let err = ctx.forward_with_attention(plan, &mut out, &mut attention).unwrap_err();
    assert_eq!(err.status, Status::Unsupported, "{err}");
    assert!(err.message.contains("prefix cache"), "{err}");
    let mut compact = vec![0.0; plan.n_compact_padded * h];
    let err = ctx.forward_compact_with_attention(plan, &mut compact, &mut attention).unwrap_err();
    assert_eq!(err.status, Status::Unsupported, "{err}");
    assert_eq!(calls, 0, "the callback never ran");
    // The refusals left the cache untouched, and the context still runs the built-in forward.
    assert_eq!(ctx.cache_stats().unwrap().slots_used, 0);
    ctx.forward(plan, &mut out).unwrap();
    assert_eq!(ctx.cache_stats().unwrap().slots_used, plan.n_compact as u64);
}
