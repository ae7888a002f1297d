//! `Context::forward_last` (each sequence's last row only) through the Rust API, on every
//! transformers fixture: its rows against `forward`'s last rows (within 1e-5 of each row's
//! largest value) with radix on and off plans and attention in full and compact space, with a
//! host attention callback and with a prefix cache; pooling and scores of those rows (cu_seqlens
//! 0, 1, ..., n_seqs) against the last-token read-outs of `forward`'s output; length errors.
mod common;

use common::{max_abs_diff, Fixture, NAMES};
use radix_mlp::{AttentionSpace, ContextParams, Gate, Model, Plan, PlanParams, Planner, Pooling, Status};

const ON: PlanParams = PlanParams { threshold: 1.0, pad_multiple_of: Some(8), gate: Gate::Distinct };
const OFF: PlanParams = PlanParams { threshold: 0.0, pad_multiple_of: None, gate: Gate::Distinct };

/// Tolerance of a last row against `forward`'s, relative to that row's largest value: the last
/// layer's GEMMs run on n_seqs rows instead of N', which may block (and so round) differently.
const ROW_TOLERANCE: f32 = 1e-5;

fn owned_plan(f: &Fixture, params: &PlanParams) -> Plan {
    Planner::new().unwrap().build(&f.input_ids, &f.position_ids, &f.cu_seqlens, params).unwrap().to_owned()
}

/// Row `cu_seqlens[s + 1] - 1` of `hidden` for every sequence s: n_seqs x h.
fn last_rows(hidden: &[f32], cu_seqlens: &[u32], h: usize) -> Vec<f32> {
    cu_seqlens[1..].iter().flat_map(|&end| &hidden[(end as usize - 1) * h..][..h]).copied().collect()
}

/// The largest difference of a row of `got` from the same row of `want`, relative to that row's
/// largest absolute value.
fn row_relative_diff(got: &[f32], want: &[f32], h: usize) -> f32 {
    got.chunks(h)
        .zip(want.chunks(h))
        .map(|(g, w)| max_abs_diff(g, w) / w.iter().fold(0.0f32, |m, x| m.max(x.abs())))
        .fold(0.0, f32::max)
}

/// cu_seqlens 0, 1, ..., n_seqs: one row per sequence, the layout of forward_last's output.
fn ones(n_seqs: usize) -> Vec<u32> {
    (0..=n_seqs as u32).collect()
}

fn space(attention_space: AttentionSpace) -> ContextParams {
    ContextParams { attention_space, ..ContextParams::default() }
}

#[test]
fn last_rows_match_forward_with_radix_on_and_off() {
    let mut bit_equal = (0, 0);
    for name in NAMES {
        let f = Fixture::load(name);
        let model = Model::load(&f.dir).unwrap();
        let h = model.config().hidden_size;
        for (label, params) in [("on", ON), ("off", OFF)] {
            let plan = owned_plan(&f, &params);
            let (n, s) = (plan.n_tokens, plan.n_seqs);
            for attention in [AttentionSpace::Full, AttentionSpace::Compact] {
                let mut ctx = model.context_with(n, space(attention)).unwrap();
                let mut full = vec![0.0; n * h];
                ctx.forward(&plan, &mut full).unwrap();
                let want = last_rows(&full, &plan.cu_seqlens, h);
                let mut got = vec![f32::NAN; s * h];
                ctx.forward_last(&plan, &mut got).unwrap();
                let diff = row_relative_diff(&got, &want, h);
                println!("{name} radix {label} {attention:?}: N={n} N'={} seqs={s}: {diff:.1e} relative", plan.n_compact);
                assert!(diff <= ROW_TOLERANCE, "{name} radix {label} {attention:?}: forward_last differs by {diff}");
                bit_equal.0 += usize::from(got == want);
                bit_equal.1 += 1;
            }
        }
    }
    println!("forward_last bit-equal to forward's last rows in {} of {} runs", bit_equal.0, bit_equal.1);
}

#[test]
fn read_outs_of_the_last_rows_are_the_last_token_read_outs() {
    for name in NAMES {
        let f = Fixture::load(name);
        let model = Model::load(&f.dir).unwrap();
        let cfg = model.config().clone();
        let h = cfg.hidden_size;
        for params in [ON, OFF] {
            let plan = owned_plan(&f, &params);
            let mut ctx = model.context_with(plan.n_tokens, space(AttentionSpace::Compact)).unwrap();
            let mut full = vec![0.0; plan.n_tokens * h];
            ctx.forward(&plan, &mut full).unwrap();
            let mut last = vec![0.0; plan.n_seqs * h];
            ctx.forward_last(&plan, &mut last).unwrap();
            let cu = ones(plan.n_seqs);
            for normalize in [false, true] {
                let want = model.pool(&full, &plan.cu_seqlens, Pooling::Last, normalize).unwrap();
                for pooling in [Pooling::Last, Pooling::Mean, Pooling::First] {
                    let got = ctx.pool(&last, &cu, pooling, normalize).unwrap();
                    assert_eq!(got.len(), want.len());
                    let diff = row_relative_diff(&got, &want, h);
                    assert!(diff <= ROW_TOLERANCE, "{name}: pool({pooling:?}, {normalize}) of the last rows: {diff}");
                }
            }
            if cfg.has_lm_head {
                let got = ctx.score_pair(&last, &cu, 7, 3).unwrap();
                let want = ctx.score_pair(&full, &plan.cu_seqlens, 7, 3).unwrap();
                for (g, w) in got.iter().zip(&want) {
                    let scale = w.logit_a.abs().max(w.logit_b.abs()).max(1.0);
                    assert!((g.logit_a - w.logit_a).abs() <= 1e-5 * scale, "{name}: {g:?} vs {w:?}");
                    assert!((g.logit_b - w.logit_b).abs() <= 1e-5 * scale, "{name}: {g:?} vs {w:?}");
                }
            }
        }
    }
}

#[test]
fn host_attention_and_prefix_cache() {
    let f = Fixture::load("qwen3_tiny");
    let model = Model::load(&f.dir).unwrap();
    let cfg = model.config().clone();
    let h = cfg.hidden_size;
    for params in [ON, OFF] {
        let plan = owned_plan(&f, &params);
        for attention in [AttentionSpace::Full, AttentionSpace::Compact] {
            let mut ctx = model.context_with(plan.n_tokens, space(attention)).unwrap();
            let mut built_in = vec![0.0; plan.n_seqs * h];
            ctx.forward_last(&plan, &mut built_in).unwrap();
            // The callback runs every layer, on every row, in the context's layout.
            let mut helper = model.context(plan.n_tokens).unwrap();
            let (mut layers, mut hosted) = (Vec::new(), vec![0.0; plan.n_seqs * h]);
            ctx.forward_last_with_attention(&plan, &mut hosted, &mut |args| {
                layers.push((args.layer, args.layout()));
                match args.layout() {
                    AttentionSpace::Compact => helper.attention_compact(args),
                    _ => helper.attention(args),
                }
            })
            .unwrap();
            let want: Vec<_> = (0..cfg.num_hidden_layers).map(|l| (l, attention)).collect();
            assert_eq!(layers, want);
            assert!(hosted == built_in, "host attention differs by {}", max_abs_diff(&hosted, &built_in));
        }
        // With a prefix cache: the first batch computes every row, the second reads them from
        // the cache; both give the rows forward gives.
        let mut full = vec![0.0; plan.n_tokens * h];
        model.context(plan.n_tokens).unwrap().forward(&plan, &mut full).unwrap();
        let want = last_rows(&full, &plan.cu_seqlens, h);
        let cached = ContextParams { cache_bytes: 16 << 20, ..ContextParams::default() };
        let mut ctx = model.context_with(plan.n_tokens, cached).unwrap();
        for round in 0..2 {
            let mut got = vec![f32::NAN; plan.n_seqs * h];
            ctx.forward_last(&plan, &mut got).unwrap();
            let diff = row_relative_diff(&got, &want, h);
            assert!(diff <= ROW_TOLERANCE, "cached forward_last, round {round}: {diff}");
        }
        assert!(ctx.cache_stats().unwrap().hit_tokens > 0, "the second round hit the cache");
    }
}

#[test]
fn forward_last_errors() {
    let f = Fixture::load("qwen3_tiny");
    let model = Model::load(&f.dir).unwrap();
    let h = model.config().hidden_size;
    let plan = owned_plan(&f, &ON);
    let mut ctx = model.context(plan.n_tokens).unwrap();
    let mut out = vec![0.0; plan.n_seqs * h];
    ctx.forward_last(&plan, &mut out).unwrap();
    let err = ctx.forward_last(&plan, &mut out[1..]).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert_eq!(
        err.message,
        format!("radix_mlp::Context::forward_last: out has {} floats, needs {} rows x {h}", plan.n_seqs * h - 1, plan.n_seqs)
    );
    let err = ctx.forward_last_with_attention(&plan, &mut out[h..], &mut |_| Ok(())).unwrap_err();
    assert!(err.message.starts_with("radix_mlp::Context::forward_last_with_attention: out has"), "{err}");
    // A longer buffer is fine (at least n_seqs rows), as for the other forwards.
    let mut long = vec![0.0; (plan.n_seqs + 1) * h];
    ctx.forward_last(&plan, &mut long).unwrap();
    assert!(long[..plan.n_seqs * h] == out[..]);
    // ... and the callback's errors carry the library's message (which layer) and the host's.
    let err = ctx
        .forward_last_with_attention(&plan, &mut out, &mut |_| {
            Err(radix_mlp::Error::new(Status::Cuda, "flashinfer: plan failed".into()))
        })
        .unwrap_err();
    assert_eq!(err.status, Status::Cuda);
    assert!(err.message.contains("flashinfer: plan failed"), "{err}");
}
