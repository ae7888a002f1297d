//! Attention in compact space through the Rust API, on every transformers fixture:
//! `forward_compact` against `forward` (1e-5 relative to the largest value), pooling and scores
//! read through `scatter` against the same read-outs of the batch rows, the compact per-layer
//! calls and a compact-layout callback (checking what it is handed) against `forward_compact`,
//! and the context setting reaching `forward` (`Compact`, and `Auto` following the gate).
mod common;

use common::{max_abs_diff, Fixture, NAMES};
use radix_mlp::{
    AttentionArgs, AttentionSpace, CompactLayout, ContextParams, Error, Gate, Model, Plan, PlanParams, Planner,
    Pooling, Status,
};

const PADDED: PlanParams = PlanParams { threshold: 1.0, pad_multiple_of: Some(8), gate: Gate::Distinct };
const OFF: PlanParams = PlanParams { threshold: 0.0, pad_multiple_of: None, gate: Gate::Distinct };

fn owned_plan(f: &Fixture, params: &PlanParams) -> Plan {
    Planner::new().unwrap().build(&f.input_ids, &f.position_ids, &f.cu_seqlens, params).unwrap().to_owned()
}

/// Compact rows (n_compact_padded x h) read through `scatter` into batch rows (n_tokens x h).
fn batch_rows(plan: &Plan, compact: &[f32], h: usize) -> Vec<f32> {
    plan.scatter.iter().flat_map(|&r| &compact[r as usize * h..][..h]).copied().collect()
}

fn relative_diff(got: &[f32], want: &[f32]) -> f32 {
    max_abs_diff(got, want) / want.iter().fold(0.0f32, |m, x| m.max(x.abs()))
}

fn space(attention_space: AttentionSpace) -> ContextParams {
    ContextParams { attention_space, ..ContextParams::default() }
}

#[test]
fn compact_forward_and_read_outs_match_full() {
    for name in NAMES {
        let f = Fixture::load(name);
        let model = Model::load(&f.dir).unwrap();
        let cfg = model.config().clone();
        let plan = owned_plan(&f, &PADDED);
        let (n, h) = (plan.n_tokens, cfg.hidden_size);
        assert!(plan.n_compact < n && plan.n_compact_padded > plan.n_compact, "{name}: shares and pads");
        let mut ctx = model.context(n).unwrap();
        assert_eq!(ctx.attention_space(), AttentionSpace::Full);
        let mut full = vec![0.0; n * h];
        ctx.forward(&plan, &mut full).unwrap();
        let mut compact = vec![f32::NAN; plan.n_compact_padded * h];
        ctx.forward_compact(&plan, &mut compact).unwrap();
        let rows = batch_rows(&plan, &compact, h);
        let diff = relative_diff(&rows, &full);
        println!("{name}: N={n} N'={}: compact vs full attention {diff:.1e} relative", plan.n_compact);
        assert!(diff <= 1e-5, "{name}: compact vs full attention differ by {diff} relative");

        // Read-outs through scatter are the read-outs of the rows it points at.
        for pooling in [Pooling::Last, Pooling::Mean, Pooling::First] {
            for normalize in [false, true] {
                let got = ctx.pool_compact(&plan, &compact, pooling, normalize).unwrap();
                let want = model.pool(&rows, &plan.cu_seqlens, pooling, normalize).unwrap();
                assert_eq!(got, want, "{name}: pool_compact({pooling:?}, {normalize})");
                let of_full = model.pool(&full, &plan.cu_seqlens, pooling, normalize).unwrap();
                assert!(relative_diff(&got, &of_full) <= 1e-5, "{name}: pool_compact vs pooling the full output");
            }
        }
        if cfg.has_lm_head {
            let got = ctx.score_pair_compact(&plan, &compact, 7, 3).unwrap();
            assert_eq!(got, ctx.score_pair(&rows, &plan.cu_seqlens, 7, 3).unwrap(), "{name}: score_pair_compact");
        } else {
            let err = ctx.score_pair_compact(&plan, &compact, 7, 3).unwrap_err();
            assert_eq!(err.status, Status::Unsupported, "{name}: {err}");
        }
    }
}

#[test]
fn per_layer_and_callback_in_compact_space_match_forward_compact() {
    for name in NAMES {
        let f = Fixture::load(name);
        let model = Model::load(&f.dir).unwrap();
        let cfg = model.config().clone();
        let plan = owned_plan(&f, &PADDED);
        let (n, rows, nc, h) = (plan.n_tokens, plan.n_compact_padded, plan.n_compact, cfg.hidden_size);
        let mut ctx = model.context(n).unwrap();
        let mut reference = vec![0.0; rows * h];
        ctx.forward_compact(&plan, &mut reference).unwrap();

        // Layer by layer, no scatter or gather, attention through Context::attention_compact.
        let mut hidden = vec![0.0; rows * h];
        let (mut q, mut attn) = (vec![0.0; rows * cfg.q_dim()], vec![0.0; rows * cfg.q_dim()]);
        let (mut k, mut v) = (vec![0.0; rows * cfg.kv_dim()], vec![0.0; rows * cfg.kv_dim()]);
        ctx.embed(&plan, &mut hidden).unwrap();
        for layer in 0..cfg.num_hidden_layers {
            ctx.pre_attention_compact(layer, &plan, &hidden, &mut q, &mut k, &mut v).unwrap();
            let la = model.layer_attention(layer).unwrap();
            let mut args = AttentionArgs {
                layer,
                n_heads: cfg.num_attention_heads,
                n_kv_heads: cfg.num_key_value_heads,
                head_dim: cfg.head_dim,
                scale: la.scale,
                sliding_window: la.sliding_window,
                softcap: la.softcap,
                cu_seqlens: &plan.cu_seqlens,
                q: &q,
                k: &k,
                v: &v,
                out: &mut attn,
                compact: Some(CompactLayout { qo_indptr: &plan.qo_indptr, kv_indices: &plan.scatter }),
            };
            assert_eq!((args.layout(), args.n_compact(), args.n_rows()), (AttentionSpace::Compact, nc, nc));
            ctx.attention_compact(&mut args).unwrap();
            ctx.post_attention_compact(layer, &plan, &attn, &mut hidden).unwrap();
        }
        let mut out = vec![0.0; rows * h];
        ctx.final_norm_compact(&plan, &hidden, &mut out).unwrap();
        assert!(
            out[..nc * h] == reference[..nc * h],
            "{name}: per-layer differs by {}",
            max_abs_diff(&out, &reference)
        );

        // The callback gets the compact layout: the plan's arrays, dense compact rows.
        let mut helper = model.context(n).unwrap();
        let mut layers = Vec::new();
        let mut out = vec![0.0; rows * h];
        ctx.forward_compact_with_attention(&plan, &mut out, &mut |args: &mut AttentionArgs<'_>| {
            let layout = args.compact.expect("the compact layout");
            assert_eq!((args.layout(), args.n_compact(), args.n_tokens()), (AttentionSpace::Compact, nc, n));
            assert_eq!((layout.qo_indptr, layout.kv_indices), (&plan.qo_indptr[..], &plan.scatter[..]));
            let owned: u32 = layout.qo_indptr.windows(2).map(|w| w[1] - w[0]).sum();
            assert_eq!(owned as usize, nc, "the sequences own every compact row once");
            assert_eq!(
                (args.q.len(), args.k.len(), args.out.len()),
                (nc * cfg.q_dim(), nc * cfg.kv_dim(), nc * cfg.q_dim())
            );
            layers.push(args.layer);
            helper.attention_compact(args)
        })
        .unwrap();
        assert_eq!(layers, (0..cfg.num_hidden_layers).collect::<Vec<_>>());
        assert!(out[..nc * h] == reference[..nc * h], "{name}: callback differs by {}", max_abs_diff(&out, &reference));
    }
}

/// `forward` through a context of `params`, with a callback (running the built-in attention of
/// its layout) recording the layouts it was handed; and without one.
fn forward_in(model: &Model, plan: &Plan, params: ContextParams) -> (Vec<f32>, Vec<f32>, Vec<AttentionSpace>) {
    let mut ctx = model.context_with(plan.n_tokens, params).unwrap();
    assert_eq!(ctx.attention_space(), params.attention_space);
    let mut helper = model.context(plan.n_tokens).unwrap();
    let (mut built_in, mut hosted) = (vec![0.0; plan.n_tokens * model.config().hidden_size], Vec::new());
    ctx.forward(plan, &mut built_in).unwrap();
    hosted.resize(built_in.len(), 0.0);
    let mut layouts = Vec::new();
    ctx.forward_with_attention(plan, &mut hosted, &mut |args| {
        layouts.push(args.layout());
        match args.layout() {
            AttentionSpace::Compact => helper.attention_compact(args),
            _ => helper.attention(args),
        }
    })
    .unwrap();
    (built_in, hosted, layouts)
}

#[test]
fn the_context_setting_reaches_forward() {
    let f = Fixture::load("qwen3_tiny");
    let model = Model::load(&f.dir).unwrap();
    let layers = model.config().num_hidden_layers;
    let h = model.config().hidden_size;
    for plan in [owned_plan(&f, &PADDED), owned_plan(&f, &OFF)] {
        let (full, full_hosted, full_layouts) = forward_in(&model, &plan, space(AttentionSpace::Full));
        assert_eq!(full_layouts, vec![AttentionSpace::Full; layers]);
        assert!(full_hosted == full);
        let mut compact = vec![0.0; plan.n_compact_padded * h];
        model.context(plan.n_tokens).unwrap().forward_compact(&plan, &mut compact).unwrap();
        let compact = batch_rows(&plan, &compact, h);
        let (got, hosted, layouts) = forward_in(&model, &plan, space(AttentionSpace::Compact));
        assert_eq!(layouts, vec![AttentionSpace::Compact; layers]);
        assert!(got == compact && hosted == compact, "a Compact context's forward is the compact forward");
        assert!(relative_diff(&got, &full) <= 1e-5);
        // Auto: compact when the plan shares rows, full otherwise.
        let (auto, _, layouts) = forward_in(&model, &plan, space(AttentionSpace::Auto));
        let want = if plan.use_radix { AttentionSpace::Compact } else { AttentionSpace::Full };
        assert_eq!(layouts, vec![want; layers], "use_radix={}", plan.use_radix);
        assert!(auto == if plan.use_radix { compact } else { full });
    }
    // A shared context takes the setting too.
    let shared = std::sync::Arc::new(model);
    let ctx = radix_mlp::Context::new_with(shared, 64, space(AttentionSpace::Compact)).unwrap();
    assert_eq!(ctx.attention_space(), AttentionSpace::Compact);
}

#[test]
fn compact_errors() {
    let f = Fixture::load("qwen3_tiny");
    let model = Model::load(&f.dir).unwrap();
    let cfg = model.config().clone();
    let plan = owned_plan(&f, &PADDED);
    let (n, rows, h) = (plan.n_tokens, plan.n_compact_padded, cfg.hidden_size);
    let mut ctx = model.context(n).unwrap();
    let mut out = vec![0.0; rows * h];

    // Lengths are checked in Rust: out must hold the padded compact rows, a layout whole.
    let err = ctx.forward_compact(&plan, &mut out[h..]).unwrap_err();
    assert!(err.message.starts_with("radix_mlp::Context::forward_compact: out has"), "{err}");
    let err = ctx.pool_compact(&plan, &out[h..], Pooling::Last, false).unwrap_err();
    assert!(err.message.starts_with("radix_mlp::Context::pool_compact: hidden has"), "{err}");
    let mut bad = plan.clone();
    bad.qo_indptr.pop();
    let err = ctx.forward_compact(&bad, &mut out).unwrap_err();
    assert_eq!(
        err.message,
        format!("radix_mlp::Plan: qo_indptr has {} entries but the plan's counts say {}", bad.n_seqs, bad.n_seqs + 1)
    );

    // A plan without the layout runs in full space, not in compact space (the library's refusal).
    let mut bare = plan.clone();
    (bare.qo_indptr, bare.run_indptr, bare.run_start) = (Vec::new(), Vec::new(), Vec::new());
    let err = ctx.forward_compact(&bare, &mut out).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.starts_with("rmlp_forward_compact: plan->qo_indptr is NULL"), "{err}");
    let mut batch = vec![0.0; n * h];
    ctx.forward(&bare, &mut batch).unwrap();

    // The layout of the args must be the call's.
    let (q, k) = (vec![0.0; n * cfg.q_dim()], vec![0.0; n * cfg.kv_dim()]);
    let mut attn = vec![0.0; n * cfg.q_dim()];
    let mut args = AttentionArgs {
        layer: 0,
        n_heads: cfg.num_attention_heads,
        n_kv_heads: cfg.num_key_value_heads,
        head_dim: cfg.head_dim,
        scale: 1.0,
        sliding_window: 0,
        softcap: 0.0,
        cu_seqlens: &plan.cu_seqlens,
        q: &q,
        k: &k,
        v: &k,
        out: &mut attn,
        compact: None,
    };
    let err = ctx.attention_compact(&mut args).unwrap_err();
    assert_eq!(
        err.message,
        "radix_mlp::Context::attention_compact: args.compact is None: the layout of this call is radix_mlp::Context::attention's"
    );
    args.compact = Some(CompactLayout { qo_indptr: &plan.qo_indptr, kv_indices: &plan.scatter[1..] });
    let err = ctx.attention(&mut args).unwrap_err();
    assert!(err.message.contains("args.compact is Some"), "{err}");
    let err = ctx.attention_compact(&mut args).unwrap_err();
    assert_eq!(
        err.message,
        format!("radix_mlp::Context::attention_compact: args.compact.kv_indices has {} entries, needs {n}", n - 1)
    );
    // ... and an index past the compact rows is the library's.
    let mut scatter = plan.scatter.clone();
    scatter[5] = plan.n_compact as u32;
    args.compact = Some(CompactLayout { qo_indptr: &plan.qo_indptr, kv_indices: &scatter });
    let err = ctx.attention_compact(&mut args).unwrap_err();
    assert!(err.message.starts_with("rmlp_attention_compact: args->kv_indices[5]="), "{err}");

    // The host's compact attention failing: the library says where, the host what.
    let err = ctx
        .forward_compact_with_attention(&plan, &mut out, &mut |_| {
            Err(Error::new(Status::Cuda, "flashinfer: plan failed".into()))
        })
        .unwrap_err();
    assert_eq!(err.status, Status::Cuda);
    assert!(err.message.starts_with("rmlp_forward_compact: the host attention failed at layer 0"), "{err}");
}
