//! The TEI-style host end to end: radix on vs off and against the transformers fixtures, its
//! attention in compact space vs full space, threads sharing one model (bit-identical to
//! serial), malformed batches failing alone.
//!
//! No leaks or invalid accesses (run once by hand, clean; the test command leaves it out).
//! `valgrind.supp` silences only std's main-thread handle (rust-lang/rust#135608):
//!
//! ```sh
//! cd integration_tests/rust-host && RADIX_MLP_LIB_DIR=$PWD/../../build LD_LIBRARY_PATH=$PWD/../../build \
//!   CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="valgrind --error-exitcode=1 --leak-check=full --suppressions=$PWD/valgrind.supp" \
//!   cargo test --offline --test host
//! ```
#[path = "../../../bindings/rust/radix-mlp/tests/common/mod.rs"]
mod fixtures;

use std::thread;

use fixtures::{max_abs_diff, Fixture, NAMES, TOLERANCE};
use radix_mlp::{AttentionSpace, Gate, Model, PlanParams, Status};
use rust_host::{causal_gqa, serve, Batch, Output};

const FULL: AttentionSpace = AttentionSpace::Full;

const MAX_TOKENS: usize = 256;
const ON: PlanParams = PlanParams { threshold: 1.0, pad_multiple_of: Some(8), gate: Gate::Distinct };
const OFF: PlanParams = PlanParams { threshold: 0.0, pad_multiple_of: Some(8), gate: Gate::Distinct };

fn fixture_batch(f: &Fixture, id: usize) -> Batch {
    let (input_ids, position_ids, cu_seqlens) = (f.input_ids.clone(), f.position_ids.clone(), f.cu_seqlens.clone());
    Batch { id, input_ids, position_ids, cu_seqlens }
}

fn serve_one(model: &Model, params: PlanParams, space: AttentionSpace, batch: Batch) -> Output {
    serve(model, MAX_TOKENS, params, space, vec![batch]).unwrap().remove(0).1.unwrap()
}

fn relative_diff(got: &[f32], want: &[f32]) -> f32 {
    max_abs_diff(got, want) / want.iter().fold(0.0f32, |m, x| m.max(x.abs()))
}

#[test]
fn radix_on_and_off_match_transformers() {
    for name in NAMES {
        let f = Fixture::load(name);
        let model = Model::load(&f.dir).unwrap();
        let (on, off) =
            (serve_one(&model, ON, FULL, fixture_batch(&f, 0)), serve_one(&model, OFF, FULL, fixture_batch(&f, 0)));
        assert!(on.use_radix && !off.use_radix && on.n_compact < off.n_compact, "{name}");
        let diff = max_abs_diff(&on.hidden, &off.hidden);
        println!("{name}: N={} N'={}, max |radix on - off| = {diff:.1e}", off.n_compact, on.n_compact);
        assert!(diff <= 1e-5, "{name}: radix on vs off differ by {diff}");
        for (out, radix) in [(&on, "on"), (&off, "off")] {
            for (got, tensor) in
                [(&out.hidden, "last_hidden"), (&out.pooled_last, "pooled_last"), (&out.pooled_mean, "pooled_mean")]
            {
                let diff = max_abs_diff(got, &f.tensor(tensor).data);
                assert!(diff <= TOLERANCE, "{name}, radix {radix}: {tensor} differs from transformers by {diff}");
            }
        }
    }
}

#[test]
fn compact_space_matches_full_space() {
    for name in NAMES {
        let f = Fixture::load(name);
        let model = Model::load(&f.dir).unwrap();
        let full = serve_one(&model, ON, FULL, fixture_batch(&f, 0));
        let compact = serve_one(&model, ON, AttentionSpace::Compact, fixture_batch(&f, 0));
        let diff = relative_diff(&compact.hidden, &full.hidden);
        println!(
            "{name}: N'={}, the host's attention in compact vs full space: {diff:.1e} relative",
            compact.n_compact
        );
        assert!(diff <= 1e-5, "{name}: compact vs full space differ by {diff} relative");
        for (got, tensor) in [(&compact.pooled_last, "pooled_last"), (&compact.pooled_mean, "pooled_mean")] {
            let diff = max_abs_diff(got, &f.tensor(tensor).data);
            assert!(diff <= TOLERANCE, "{name}, compact space: {tensor} differs from transformers by {diff}");
        }
        assert!(compact.compact_space && !full.compact_space, "{name}");
        // Auto follows the gate: compact space with radix, full space without.
        assert!(serve_one(&model, ON, AttentionSpace::Auto, fixture_batch(&f, 0)) == compact, "{name}");
        let off = serve_one(&model, OFF, FULL, fixture_batch(&f, 0));
        assert!(serve_one(&model, OFF, AttentionSpace::Auto, fixture_batch(&f, 0)) == off, "{name}");
    }
}

/// Fixtures for the callback tests: plain attention, sliding windows shorter than the batch's
/// sequences (Qwen2, Mistral, Gemma 3) and soft-capped scores (Gemma 2), which the callback is told.
const CALLBACK_FIXTURES: [&str; 5] = ["llama_tiny", "qwen2_window", "mistral_window", "gemma2_window", "gemma3_text"];

#[test]
fn host_compact_attention_equals_the_library_s() {
    for name in CALLBACK_FIXTURES {
        host_compact_attention_on(name);
    }
}

fn host_compact_attention_on(name: &'static str) {
    let f = Fixture::load(name);
    let model = Model::load(&f.dir).unwrap();
    let plan =
        radix_mlp::Planner::new().unwrap().build(&f.input_ids, &f.position_ids, &f.cu_seqlens, &ON).unwrap().to_owned();
    let mut ctx = model.context(MAX_TOKENS).unwrap();
    let rows = plan.n_compact_padded * model.config().hidden_size;
    let (mut host, mut library) = (vec![0.0; rows], vec![0.0; rows]);
    let mut layouts = Vec::new();
    ctx.forward_compact_with_attention(&plan, &mut host, &mut |a| {
        layouts.push(a.layout());
        causal_gqa(a);
        Ok(())
    })
    .unwrap();
    assert_eq!(layouts, vec![AttentionSpace::Compact; model.config().num_hidden_layers]);
    ctx.forward_compact(&plan, &mut library).unwrap();
    let diff = relative_diff(&host, &library);
    assert!(diff <= 1e-5, "{name}: the host's compact attention differs from the library's by {diff} relative");
    // The callback and the per-layer calls hand the host the same compact rows.
    let h = model.config().hidden_size;
    let per_layer = serve_one(&model, ON, AttentionSpace::Compact, fixture_batch(&f, 0)).hidden;
    let via_callback: Vec<f32> = plan.scatter.iter().flat_map(|&r| &host[r as usize * h..][..h]).copied().collect();
    assert!(via_callback == per_layer, "{name}");
}

#[test]
fn host_attention_through_the_callback_equals_per_layer() {
    for name in CALLBACK_FIXTURES {
        host_attention_through_the_callback_on(name);
    }
}

fn host_attention_through_the_callback_on(name: &'static str) {
    let f = Fixture::load(name);
    let model = Model::load(&f.dir).unwrap();
    let plan =
        radix_mlp::Planner::new().unwrap().build(&f.input_ids, &f.position_ids, &f.cu_seqlens, &ON).unwrap().to_owned();
    let mut out = vec![0.0; plan.n_tokens * model.config().hidden_size];
    model
        .context(MAX_TOKENS)
        .unwrap()
        .forward_with_attention(&plan, &mut out, &mut |a| {
            causal_gqa(a);
            Ok(())
        })
        .unwrap();
    assert!(out == serve_one(&model, ON, FULL, fixture_batch(&f, 0)).hidden, "{name}");
}

/// Batches cut from the fixture's sequences: every window of 3 consecutive sequences.
fn batches(f: &Fixture) -> Vec<Batch> {
    let seqs: Vec<&[u32]> = f.cu_seqlens.windows(2).map(|w| &f.input_ids[w[0] as usize..w[1] as usize]).collect();
    (0..seqs.len() - 2).map(|i| Batch::from_sequences(i, &seqs[i..i + 3])).collect()
}

#[test]
fn threads_sharing_one_model_match_serial() {
    let f = Fixture::load("qwen3_tiny");
    let model = Model::load(&f.dir).unwrap();
    let serial = serve(&model, MAX_TOKENS, ON, FULL, batches(&f)).unwrap();
    let serial: Vec<Output> = serial.into_iter().map(|(_, out)| out.unwrap()).collect();
    let results = thread::scope(|s| {
        let threads: Vec<_> = (0..3)
            .map(|t| {
                let mut mine = batches(&f);
                mine.rotate_left(t); // different batches in flight at once
                let model = &model;
                s.spawn(move || serve(model, MAX_TOKENS, ON, FULL, mine).unwrap())
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect::<Vec<_>>()
    });
    for results in results {
        for (id, out) in results {
            assert!(out.unwrap() == serial[id], "batch {id} differs from the serial run");
        }
    }
}

#[test]
fn malformed_batches_fail_alone() {
    let f = Fixture::load("qwen3_tiny");
    let model = Model::load(&f.dir).unwrap();
    let vocab = model.config().vocab_size as u32;
    let good = batches(&f);
    let mut bad_seqlens = fixture_batch(&f, 10);
    bad_seqlens.cu_seqlens[2] = 30; // below cu_seqlens[1] = 32
    let mut bad_token = fixture_batch(&f, 11);
    bad_token.input_ids[40] = vocab;
    let too_long = Batch::from_sequences(12, &[&vec![1; MAX_TOKENS + 1]]);
    let queue = vec![good[0].clone(), bad_seqlens, good[1].clone(), bad_token, too_long, good[2].clone()];

    let results = serve(&model, MAX_TOKENS, ON, FULL, queue).unwrap();
    let ids: Vec<usize> = results.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [0, 10, 1, 11, 12, 2]);
    let errors: Vec<_> =
        results.iter().filter_map(|(_, r)| r.as_ref().err()).map(|e| (e.status, e.message.as_str())).collect();
    assert_eq!(
        errors,
        [
            (Status::InvalidSeqlens, "rmlp_plan_build: cu_seqlens[2]=30 < cu_seqlens[1]=32"),
            (Status::InvalidArgument, &*format!("rmlp_embed: input_ids[40]={vocab} >= vocab_size={vocab}")),
            (
                Status::InvalidArgument,
                "rmlp_embed: plan has 257 tokens (264 compact rows) but the context was created for 256 tokens"
            ),
        ]
    );
    for (id, result) in results.into_iter().filter(|(id, _)| *id < 10) {
        assert!(result.unwrap() == serve_one(&model, ON, FULL, good[id].clone()), "batch {id} after a failed one");
    }
}
