//! `Model` and `Context` against the transformers fixtures: `forward` (radix on, a borrowed
//! `PlanView`), pooling and reranker logits within 1e-4; the per-layer entry points and the
//! attention callback (owned `Plan`s, attention through the Rust API) bit-identical to
//! `forward`; errors carrying the library's messages, Rust-side length checks, a host
//! callback's error and panic. A hand-written Rust attention, threads and radix on vs off are
//! exercised by `integration_tests/rust-host`.
mod common;

use common::{max_abs_diff, Fixture, NAMES, TOLERANCE};
use radix_mlp::{AttentionArgs, Error, Gate, Model, Plan, PlanParams, Planner, Pooling, Status};

const ALWAYS: PlanParams = PlanParams { threshold: 1.0, pad_multiple_of: None, gate: Gate::Distinct };

fn load(f: &Fixture) -> Model {
    Model::load(&f.dir).unwrap_or_else(|e| panic!("{}: {e}", f.name))
}

fn owned_plan(f: &Fixture, params: &PlanParams) -> Plan {
    Planner::new().unwrap().build(&f.input_ids, &f.position_ids, &f.cu_seqlens, params).unwrap().to_owned()
}

fn assert_close(f: &Fixture, what: &str, got: &[f32], want: &[f32]) {
    let diff = max_abs_diff(got, want);
    assert!(diff <= TOLERANCE, "{}: {what} differs from transformers by {diff}", f.name);
}

#[test]
fn forward_matches_transformers() {
    for name in NAMES {
        let f = Fixture::load(name);
        let model = load(&f);
        let cfg = model.config().clone();
        // The load uses every tensor; the report may only name config.json's bias flags that the
        // architecture does not read (the *_bias fixtures set every flag; transformers ignores them).
        let report = model.load_report();
        let named = report.split("ignores them:").nth(1).unwrap_or("");
        assert!(
            report.is_empty()
                || (report.starts_with("config.json has ")
                    && report.lines().count() == 1
                    && named.split(',').all(|k| matches!(k.trim(), "'attention_bias'" | "'mlp_bias'"))),
            "{name}: load report {report:?}"
        );
        assert_eq!(f.tensor("last_hidden").shape, [f.input_ids.len(), cfg.hidden_size]);
        let mut planner = Planner::new().unwrap();
        let plan = planner.build(&f.input_ids, &f.position_ids, &f.cu_seqlens, &ALWAYS).unwrap();
        assert!(plan.n_compact() < plan.n_tokens(), "{name}: the batch shares prefixes");
        let mut ctx = model.context(f.input_ids.len()).unwrap();
        let mut hidden = vec![f32::NAN; f.input_ids.len() * cfg.hidden_size];
        ctx.forward(&plan, &mut hidden).unwrap();
        assert_close(&f, "last_hidden", &hidden, &f.tensor("last_hidden").data);
        for (pooling, tensor) in [(Pooling::Last, "pooled_last"), (Pooling::Mean, "pooled_mean")] {
            let pooled = model.pool(&hidden, &f.cu_seqlens, pooling, false).unwrap();
            assert_close(&f, tensor, &pooled, &f.tensor(tensor).data);
        }
        if !cfg.has_lm_head {
            let err = ctx.score_pair(&hidden, &f.cu_seqlens, 0, 1).unwrap_err();
            assert_eq!(err.status, Status::Unsupported, "{name}: {err}");
            continue;
        }
        let (a, b) = (7, 3);
        let logits = &f.tensor("logits_last").data;
        for (s, score) in ctx.score_pair(&hidden, &f.cu_seqlens, a, b).unwrap().iter().enumerate() {
            let want = [logits[s * cfg.vocab_size + a as usize], logits[s * cfg.vocab_size + b as usize]];
            assert_close(&f, "logits_last", &[score.logit_a, score.logit_b], &want);
            assert!((score.prob_a - 1.0 / (1.0 + (score.logit_b - score.logit_a).exp())).abs() < 1e-6);
        }
    }
}

#[test]
fn per_layer_and_callback_match_forward() {
    for name in NAMES {
        let f = Fixture::load(name);
        let model = load(&f);
        let cfg = model.config().clone();
        let padded = PlanParams { threshold: 1.0, pad_multiple_of: Some(8), gate: Gate::Distinct };
        let plan = owned_plan(&f, &padded);
        let (n, rows, h) = (plan.n_tokens, plan.n_compact_padded, cfg.hidden_size);
        let mut ctx = model.context(n).unwrap();
        let mut reference = vec![0.0; n * h];
        ctx.forward(&plan, &mut reference).unwrap();

        // Layer by layer, attention through Context::attention.
        let mut hidden = vec![0.0; rows * h];
        let (mut q, mut attn) = (vec![0.0; n * cfg.q_dim()], vec![0.0; n * cfg.q_dim()]);
        let (mut k, mut v) = (vec![0.0; n * cfg.kv_dim()], vec![0.0; n * cfg.kv_dim()]);
        ctx.embed(&plan, &mut hidden).unwrap();
        for layer in 0..cfg.num_hidden_layers {
            ctx.pre_attention(layer, &plan, &hidden, &mut q, &mut k, &mut v).unwrap();
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
                compact: None,
            };
            ctx.attention(&mut args).unwrap();
            ctx.post_attention(layer, &plan, &attn, &mut hidden).unwrap();
        }
        let mut out = vec![0.0; n * h];
        ctx.final_norm(&plan, &hidden, &mut out).unwrap();
        assert!(out == reference, "{name}: per-layer differs from forward by {}", max_abs_diff(&out, &reference));

        // The callback, seeing the shapes of the model and the plan's cu_seqlens.
        let mut helper = model.context(n).unwrap();
        let mut layers = Vec::new();
        let mut out = vec![0.0; n * h];
        ctx.forward_with_attention(&plan, &mut out, &mut |args: &mut AttentionArgs<'_>| {
            assert_eq!(
                (args.n_heads, args.n_kv_heads, args.head_dim),
                (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim)
            );
            assert_eq!((args.cu_seqlens, args.n_tokens(), args.q.len()), (&plan.cu_seqlens[..], n, n * cfg.q_dim()));
            layers.push(args.layer);
            helper.attention(args)
        })
        .unwrap();
        assert_eq!(layers, (0..cfg.num_hidden_layers).collect::<Vec<_>>());
        assert!(out == reference, "{name}: callback differs from forward by {}", max_abs_diff(&out, &reference));
    }
}

fn error(result: Result<(), Error>) -> Error {
    result.expect_err("an error")
}

#[test]
fn errors_carry_the_messages() {
    let err = Model::load("/nonexistent/model").unwrap_err();
    assert_eq!(err.status, Status::Io, "{err}");
    assert!(err.message.contains("rmlp_model_load") && err.message.contains("/nonexistent/model"), "{err}");

    let f = Fixture::load("qwen3_tiny");
    let model = load(&f);
    let (h, vocab) = (model.config().hidden_size, model.config().vocab_size as u32);
    let mut ctx = model.context(f.input_ids.len()).unwrap();
    let mut out = vec![0.0; f.input_ids.len() * h];

    // Token id out of range: the library names the batch row.
    let mut ids = f.input_ids.clone();
    ids[40] = vocab;
    let plan = Planner::new().unwrap().build(&ids, &f.position_ids, &f.cu_seqlens, &ALWAYS).unwrap().to_owned();
    let err = error(ctx.forward(&plan, &mut out));
    assert_eq!(err.status, Status::InvalidArgument);
    assert_eq!(err.message, format!("rmlp_forward: input_ids[40]={vocab} >= vocab_size={vocab}"));
    assert!(error(ctx.embed(&plan, &mut out)).message.starts_with("rmlp_embed: input_ids[40]="));

    // Slices too short, or a plan whose arrays disagree with its counts: checked in Rust.
    let plan = owned_plan(&f, &ALWAYS);
    let err = error(ctx.forward(&plan, &mut out[1..]));
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.starts_with("radix_mlp::Context::forward: out has"), "{err}");
    let mut small = [[0.0; 10]; 3];
    let [q, k, v] = &mut small;
    let err = error(ctx.pre_attention(0, &plan, &out, q, k, v));
    assert_eq!(err.message, "radix_mlp::Context::pre_attention: q has 10 floats, needs 150 rows x 128");
    let mut bad = plan.clone();
    bad.scatter.pop();
    assert!(error(ctx.forward(&bad, &mut out)).message.contains("scatter has 149 entries"));
    // A padding row's token id, which the library does not check (it would read past the
    // embedding matrix): refused in Rust.
    let mut bad = owned_plan(&f, &PlanParams { threshold: 1.0, pad_multiple_of: Some(64), gate: Gate::Distinct });
    *bad.compact_input_ids.last_mut().unwrap() = 1 << 30;
    let err = error(ctx.embed(&bad, &mut out.repeat(2)));
    let last = bad.n_compact_padded - 1;
    assert!(err.message.ends_with(&format!("row {last} has compact_input_ids[{last}]=1073741824 >= vocab_size=1000")));
    // ... and an index out of range is the library's.
    let mut bad = plan.clone();
    bad.scatter[3] = bad.n_compact as u32;
    let err = error(ctx.forward(&bad, &mut out));
    assert!(err.message.starts_with("rmlp_forward: plan->scatter[3]="), "{err}");

    // A context too small, a layer past the end, an empty sequence to pool.
    let err = error(model.context(8).unwrap().forward(&plan, &mut out));
    assert!(err.message.contains("the context was created for 8 tokens"), "{err}");
    let err = error(ctx.post_attention(99, &plan, &vec![0.0; 150 * 128], &mut out));
    assert_eq!(err.message, "rmlp_layer_post_attention: layer=99 but the model has 3 layers");
    let err = model.pool(&out, &[0, 0, 150], Pooling::Last, false).unwrap_err();
    assert_eq!(
        (err.status, err.message.as_str()),
        (Status::InvalidSeqlens, "rmlp_pool: sequence 0 is empty (cu_seqlens[0]=cu_seqlens[1]=0)")
    );

    // The host's attention fails at layer 1, then panics: the library says where, the host what.
    let mut host = |args: &mut AttentionArgs<'_>| {
        args.out.fill(0.0);
        match args.layer {
            0 => Ok(()),
            _ => Err(Error::new(Status::Cuda, "flash-attn: out of shared memory".into())),
        }
    };
    let err = error(ctx.forward_with_attention(&plan, &mut out, &mut host));
    assert_eq!(err.status, Status::Cuda);
    assert!(err.message.starts_with("rmlp_forward: the host attention failed at layer 1"), "{err}");
    assert!(err.message.ends_with(": flash-attn: out of shared memory"), "{err}");
    let err = error(ctx.forward_with_attention(&plan, &mut out, &mut |_| panic!("boom")));
    assert_eq!(err.status, Status::Internal);
    assert!(err.message.ends_with("the attention callback panicked: boom"), "{err}");

    // The context still works after all of that.
    ctx.forward(&plan, &mut out).unwrap();
    assert!(max_abs_diff(&out, &f.tensor("last_hidden").data) <= TOLERANCE);
}

#[test]
fn model_is_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    fn sendable<T: Send>() {}
    shared::<Model>();
    sendable::<radix_mlp::Context<'static>>();
}

/// `ModelParams::cpu_weight_dtype = DType::BF16`: qwen3_bf16 (weights bf16 already) within
/// transformers' 1e-4, qwen3_tiny (fp32 weights) within the stated 2e-2 of the largest value
/// but not equal to it; F16 refused with the library's message. The widening path, pinned: where the
/// CPU runs bf16 the default takes oneDNN's GEMMs (checked by the C suite's test_bf16_onednn).
#[test]
fn bf16_weights_on_the_cpu() {
    use radix_mlp::{CpuBf16Gemm, DType, ModelParams};
    let params =
        ModelParams { cpu_weight_dtype: DType::BF16, cpu_bf16_gemm: CpuBf16Gemm::Widen, ..ModelParams::default() };
    for (name, exact) in [("qwen3_bf16", true), ("qwen3_tiny", false)] {
        let f = Fixture::load(name);
        let model = Model::load_with(&f.dir, params).unwrap_or_else(|e| panic!("{name}: {e}"));
        let plan = owned_plan(&f, &ALWAYS);
        let mut ctx = model.context(f.input_ids.len()).unwrap();
        let mut hidden = vec![f32::NAN; f.input_ids.len() * model.config().hidden_size];
        ctx.forward(&plan, &mut hidden).unwrap();
        let want = &f.tensor("last_hidden").data;
        let (diff, top) = (max_abs_diff(&hidden, want), want.iter().fold(0.0f32, |m, v| m.max(v.abs())));
        let bound = if exact { TOLERANCE } else { 2e-2 * top };
        assert!(diff <= bound && diff > 0.0, "{name}: bf16 weights vs transformers {diff} (bound {bound})");
    }
    let refused = ModelParams { cpu_weight_dtype: DType::F16, ..ModelParams::default() };
    let err = Model::load_with(&Fixture::load("qwen3_tiny").dir, refused).unwrap_err();
    assert_eq!(err.status, Status::Unsupported, "{err}");
    assert!(err.to_string().contains("params->cpu_weight_dtype=1"), "{err}");
}

/// `ModelParams::cpu_bf16_gemm` and `Model::cpu_bf16_gemm`, on any CPU: an f32 model has no bf16
/// GEMM; `OneDnn` runs oneDNN or is refused saying why; a bf16 model takes oneDNN by default exactly
/// where it runs (saying how to widen instead), else widens saying why not; `Widen` widens; either
/// with f32 weights is `InvalidArgument`.
#[test]
fn cpu_bf16_gemm_choice() {
    use radix_mlp::{CpuBf16Gemm, DType, ModelParams};
    let f = Fixture::load("qwen3_tiny");
    let bf16 = ModelParams { cpu_weight_dtype: DType::BF16, ..ModelParams::default() };
    let load_bf16 = |gemm| Model::load_with(&f.dir, ModelParams { cpu_bf16_gemm: gemm, ..bf16 });

    let info = load(&f).cpu_bf16_gemm().unwrap();
    assert_eq!((info.kind, info.fallbacks), (None, 0), "{info:?}");

    let onednn_runs = match load_bf16(CpuBf16Gemm::OneDnn) {
        Ok(model) => {
            let info = model.cpu_bf16_gemm().unwrap();
            assert_eq!(info.kind, Some(CpuBf16Gemm::OneDnn), "{info:?}");
            true
        }
        Err(err) => {
            assert_eq!(err.status, Status::Unsupported, "{err}");
            assert!(err.message.contains("cannot run"), "{err}");
            false
        }
    };

    let info = load_bf16(CpuBf16Gemm::Auto).unwrap().cpu_bf16_gemm().unwrap();
    if onednn_runs {
        assert_eq!(info.kind, Some(CpuBf16Gemm::OneDnn), "{info:?}");
        assert!(info.detail.contains("RADIX_MLP_CPU_BF16_GEMM=widen"), "{info:?}");
    } else {
        assert_eq!(info.kind, Some(CpuBf16Gemm::Widen), "{info:?}");
        assert!(info.detail.contains("cannot run"), "{info:?}");
    }

    let info = load_bf16(CpuBf16Gemm::Widen).unwrap().cpu_bf16_gemm().unwrap();
    assert_eq!((info.kind, info.fallbacks), (Some(CpuBf16Gemm::Widen), 0), "{info:?}");

    let f32_onednn = ModelParams { cpu_bf16_gemm: CpuBf16Gemm::OneDnn, ..ModelParams::default() };
    let err = Model::load_with(&f.dir, f32_onednn).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("params->cpu_bf16_gemm="), "{err}");
}

#[test]
fn names_cover_every_fixture() {
    let mut folders: Vec<String> = std::fs::read_dir(common::fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().join("config.json").is_file())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    folders.sort();
    let mut names: Vec<String> = NAMES.iter().map(|n| n.to_string()).collect();
    names.sort();
    assert_eq!(names, folders, "tests/common/mod.rs's NAMES against integration_tests/fixtures");
}

/// Each layer's scale, window and soft-cap as config.json gives them (Gemma 2: sliding layers 0
/// and 2 of 5 keys, every layer capped at 3, scale 24^-0.5; Mistral: every layer 6 keys), and the
/// built-in attention refusing args whose window or soft-cap is not the layer's, by the field.
#[test]
fn layer_attention_and_its_check() {
    let gemma2 = Model::load(Fixture::load("gemma2_window").dir).unwrap();
    let la: Vec<_> = (0..3).map(|l| gemma2.layer_attention(l).unwrap()).collect();
    assert_eq!(la.iter().map(|a| a.sliding_window).collect::<Vec<_>>(), [5, 0, 5]);
    assert!(la.iter().all(|a| a.softcap == 3.0 && a.scale == (24.0f64.powf(-0.5) as f32)), "{la:?}");
    let err = gemma2.layer_attention(3).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("layer=3 but the model has 3 layers"), "{err}");

    let f = Fixture::load("mistral_window");
    let model = Model::load(&f.dir).unwrap();
    let cfg = model.config().clone();
    let la = model.layer_attention(0).unwrap();
    assert_eq!((la.sliding_window, la.softcap, la.scale), (6, 0.0, 1.0 / (cfg.head_dim as f32).sqrt()));
    let mut planner = Planner::new().unwrap();
    let plan = planner.build(&f.input_ids, &f.position_ids, &f.cu_seqlens, &PlanParams::default()).unwrap().to_owned();
    let n = plan.n_tokens;
    let (q, kv) = (vec![0.0; n * cfg.q_dim()], vec![0.0; n * cfg.kv_dim()]);
    let mut out = vec![0.0; n * cfg.q_dim()];
    let mut ctx = model.context(n).unwrap();
    for (window, softcap, field) in [(0, 0.0, "args->sliding_window=0"), (6, 1.0, "args->softcap=1"), (6, 0.0, "")] {
        let mut args = AttentionArgs {
            layer: 0,
            n_heads: cfg.num_attention_heads,
            n_kv_heads: cfg.num_key_value_heads,
            head_dim: cfg.head_dim,
            scale: la.scale,
            sliding_window: window,
            softcap,
            cu_seqlens: &plan.cu_seqlens,
            q: &q,
            k: &kv,
            v: &kv,
            out: &mut out,
            compact: None,
        };
        match ctx.attention(&mut args) {
            Ok(()) => assert!(field.is_empty(), "{field} was not refused"),
            Err(e) => assert!(!field.is_empty() && e.message.contains(field), "{e}"),
        }
    }
}
