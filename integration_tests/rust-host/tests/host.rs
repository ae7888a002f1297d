//! The TEI-style host end to end: radix on vs off and against the transformers fixtures, threads
//! sharing one model (bit-identical to serial), malformed batches failing alone.
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
use radix_mlp::{Model, PlanParams, Status};
use rust_host::{causal_gqa, serve, Batch, Output};

const MAX_TOKENS: usize = 256;
const ON: PlanParams = PlanParams { threshold: 1.0, pad_multiple_of: Some(8) };
const OFF: PlanParams = PlanParams { threshold: 0.0, pad_multiple_of: Some(8) };

fn fixture_batch(f: &Fixture, id: usize) -> Batch {
    let (input_ids, position_ids, cu_seqlens) = (f.input_ids.clone(), f.position_ids.clone(), f.cu_seqlens.clone());
    Batch { id, input_ids, position_ids, cu_seqlens }
}

fn serve_one(model: &Model, params: PlanParams, batch: Batch) -> Output {
    serve(model, MAX_TOKENS, params, vec![batch]).unwrap().remove(0).1.unwrap()
}

#[test]
fn radix_on_and_off_match_transformers() {
    for name in NAMES {
        let f = Fixture::load(name);
        let model = Model::load(&f.dir).unwrap();
        let (on, off) = (serve_one(&model, ON, fixture_batch(&f, 0)), serve_one(&model, OFF, fixture_batch(&f, 0)));
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
fn host_attention_through_the_callback_equals_per_layer() {
    let f = Fixture::load("llama_tiny");
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
    assert!(out == serve_one(&model, ON, fixture_batch(&f, 0)).hidden);
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
    let serial = serve(&model, MAX_TOKENS, ON, batches(&f)).unwrap();
    let serial: Vec<Output> = serial.into_iter().map(|(_, out)| out.unwrap()).collect();
    let results = thread::scope(|s| {
        let threads: Vec<_> = (0..3)
            .map(|t| {
                let mut mine = batches(&f);
                mine.rotate_left(t); // different batches in flight at once
                let model = &model;
                s.spawn(move || serve(model, MAX_TOKENS, ON, mine).unwrap())
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

    let results = serve(&model, MAX_TOKENS, ON, queue).unwrap();
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
        assert!(result.unwrap() == serve_one(&model, ON, good[id].clone()), "batch {id} after a failed one");
    }
}
