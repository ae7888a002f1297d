//! Generation through the Rust API ([`Context::generate_begin`], [`Generation`],
//! [`Context::generate_greedy`]): on every fixture with an LM head, greedy ids equal
//! transformers' `generate(do_sample=False)` (`generate.json`, tools/make_generate_fixtures.py),
//! with shared-prefix attention on and off, on a borrowing and an `Arc` context; the session API
//! step by step gives the same ids, its active set and counters follow the steps, and a second
//! session over the same prompts finds every row cached; a sequence finished early leaves the
//! others' ids unchanged; dropping a session ends it; bad input returns errors, not panics.
mod common;

use std::fs;
use std::sync::Arc;

use common::{fixtures_dir, json_rows, json_u32};
use radix_mlp::{argmax, Context, ContextParams, GenerateParams, Model, Plan, PlanParams, Planner, Status};

const CACHE_BYTES: u64 = 64 << 20;

/// A fixture's `generate.json`: prompts, transformers' greedy ids, the budget and EOS ids.
struct GenFixture {
    name: &'static str,
    model: Model,
    prompts: Vec<Vec<u32>>,
    want: Vec<Vec<u32>>,
    max_new: u32,
    eos: Vec<u32>,
}

/// Every fixture that has a `generate.json` (all with an LM head).
fn fixtures() -> Vec<GenFixture> {
    let found: Vec<GenFixture> = common::NAMES
        .iter()
        .filter_map(|&name| {
            let dir = fixtures_dir().join(name);
            let json = fs::read_to_string(dir.join("generate.json")).ok()?;
            let model = Model::load(&dir).unwrap_or_else(|e| panic!("{name}: {e}"));
            let (prompts, want) = (json_rows(&json, "prompts"), json_rows(&json, "generated"));
            assert_eq!(prompts.len(), want.len(), "{name}: generate.json");
            let eos = json_rows(&json, "eos_token_id").concat();
            Some(GenFixture { name, model, prompts, want, max_new: json_u32(&json, "max_new_tokens"), eos })
        })
        .collect();
    assert!(found.len() >= 8, "only {} fixtures have generate.json", found.len());
    found
}

/// One batch of `prompts`, positions 0.. per sequence, rows shared (threshold 1).
fn plan_of(prompts: &[Vec<u32>]) -> Plan {
    let (mut ids, mut pos, mut cu) = (Vec::new(), Vec::new(), vec![0u32]);
    for p in prompts {
        ids.extend(p);
        pos.extend(0..p.len() as u32);
        cu.push(ids.len() as u32);
    }
    let params = PlanParams { threshold: 1.0, ..PlanParams::default() };
    Planner::new().unwrap().build(&ids, &pos, &cu, &params).unwrap().to_owned()
}

fn cached() -> ContextParams {
    ContextParams { cache_bytes: CACHE_BYTES, ..ContextParams::default() }
}

fn params(max_new: u32, shared: bool) -> GenerateParams {
    GenerateParams { max_new_tokens: max_new, shared_prefix_attention: shared }
}

#[test]
fn greedy_ids_match_transformers() {
    for f in fixtures() {
        let plan = plan_of(&f.prompts);
        for shared in [true, false] {
            let mut ctx = f.model.context_with(plan.n_tokens, cached()).unwrap();
            let got = ctx.generate_greedy(&plan, &params(f.max_new, shared), &f.eos).unwrap();
            assert_eq!(got, f.want, "{}: shared_prefix_attention={shared}", f.name);
        }
    }
}

#[test]
fn shared_context_generates_the_same() {
    let f = fixtures().remove(0);
    let plan = plan_of(&f.prompts);
    let mut ctx = Context::new_with(Arc::new(f.model), plan.n_tokens, cached()).unwrap();
    assert_eq!(ctx.generate_greedy(&plan, &params(f.max_new, true), &f.eos).unwrap(), f.want, "{}", f.name);
}

/// The session driven by hand: the same ids, the active set and counters after each step.
#[test]
fn session_steps_match_fixture_and_count() {
    for f in fixtures().into_iter().take(3) {
        let plan = plan_of(&f.prompts);
        let n = f.prompts.len();
        let mut ctx = f.model.context_with(plan.n_tokens, cached()).unwrap();
        for round in 0..2 {
            let (mut gen, mut logits) = ctx.generate_begin(&plan, &params(f.max_new, true)).unwrap();
            assert_eq!((gen.n_seqs(), gen.vocab_size()), (n, f.model.config().vocab_size));
            assert_eq!(logits.len(), n * gen.vocab_size());
            assert_eq!(gen.active().unwrap(), (0..n as u32).collect::<Vec<_>>());
            let mut got = vec![Vec::new(); n];
            let (mut steps, mut rows) = (0u64, 0u64);
            loop {
                let active = gen.active().unwrap();
                let mut next = Vec::new();
                for (i, &s) in active.iter().enumerate() {
                    let t = argmax(&logits[i * gen.vocab_size()..(i + 1) * gen.vocab_size()]);
                    got[s as usize].push(t);
                    if f.eos.contains(&t) || got[s as usize].len() == f.max_new as usize {
                        gen.finish(s as usize).unwrap();
                    } else {
                        next.push(t);
                    }
                }
                if next.is_empty() {
                    break;
                }
                logits = gen.step(&next).unwrap();
                assert_eq!(logits.len(), next.len() * gen.vocab_size());
                steps += 1;
                rows += next.len() as u64;
                let stats = gen.stats().unwrap();
                assert_eq!((stats.n_seqs, stats.steps, stats.rows), (n as u64, steps, rows), "{}", f.name);
                assert!(stats.rows_computed <= stats.rows && stats.step_ms >= stats.attention_ms);
                if round == 1 {
                    assert_eq!(stats.rows_computed, 0, "{}: the second session recomputed rows", f.name);
                }
            }
            assert!(gen.active().unwrap().is_empty());
            assert_eq!(gen.stats().unwrap().n_active, 0);
            assert_eq!(got, f.want, "{}: round {round}", f.name);
            gen.end().unwrap();
        }
    }
}

/// A sequence finished after its first token leaves the others' greedy ids as transformers'.
#[test]
fn finishing_early_keeps_the_others() {
    for f in fixtures().into_iter().take(3) {
        let plan = plan_of(&f.prompts);
        let mut ctx = f.model.context_with(plan.n_tokens, cached()).unwrap();
        let stop = f.eos.first().copied().unwrap_or(0);
        let eos = [stop];
        let got = ctx
            .generate(&plan, &params(f.max_new, true), &eos, |s, logits| if s == 1 { stop } else { argmax(logits) })
            .unwrap();
        assert_eq!(got[1], vec![stop], "{}", f.name);
        for (s, (g, w)) in got.iter().zip(&f.want).enumerate().filter(|&(s, _)| s != 1) {
            assert_eq!(g, w, "{}: sequence {s}", f.name);
        }
    }
}

#[test]
fn dropping_a_session_ends_it() {
    let f = fixtures().remove(0);
    let plan = plan_of(&f.prompts);
    let mut ctx = f.model.context_with(plan.n_tokens, cached()).unwrap();
    {
        let (mut gen, _) = ctx.generate_begin(&plan, &GenerateParams::default()).unwrap();
        gen.step(&vec![5; f.prompts.len()]).unwrap();
    }
    // no session left: the cache can be cleared and a new session begins
    ctx.cache_clear().unwrap();
    assert_eq!(ctx.generate_greedy(&plan, &params(f.max_new, true), &f.eos).unwrap(), f.want);
}

#[test]
fn bad_input_is_an_error() {
    let all = fixtures();
    let f = &all[0];
    let plan = plan_of(&f.prompts);
    let n = f.prompts.len();
    let vocab = f.model.config().vocab_size as u32;

    // no cache
    let mut plain = f.model.context(plan.n_tokens).unwrap();
    let err = plain.generate_begin(&plan, &GenerateParams::default()).unwrap_err();
    assert_eq!(err.status, Status::Unsupported, "{err}");
    assert!(err.message.contains("cache_bytes"), "{err}");

    // no LM head
    let dir = fixtures_dir().join("qwen3_embedding_noprefix");
    let embedder = Model::load(&dir).unwrap();
    assert!(!embedder.config().has_lm_head);
    let mut ectx = embedder.context_with(plan.n_tokens, cached()).unwrap();
    let err = ectx.generate_greedy(&plan, &GenerateParams::default(), &[]).unwrap_err();
    assert_eq!(err.status, Status::Unsupported, "{err}");

    let mut ctx = f.model.context_with(plan.n_tokens, cached()).unwrap();
    // a budget of zero, and a prompt too large for the cache with its budget
    assert_eq!(ctx.generate_greedy(&plan, &params(0, true), &[]).unwrap_err().status, Status::InvalidArgument);
    let err = ctx.generate_begin(&plan, &params(u32::MAX, true)).unwrap_err();
    assert_eq!(err.status, Status::TooLarge, "{err}");

    let (mut gen, _) = ctx.generate_begin(&plan, &params(2, true)).unwrap();
    // wrong count, an id outside the vocabulary, a short logits buffer
    let err = gen.step(&vec![1; n + 1]).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("n_tokens"), "{err}");
    let mut tokens = vec![1; n];
    tokens[n - 1] = vocab;
    let err = gen.step(&tokens).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("vocab_size"), "{err}");
    let mut short = vec![0.0; n * vocab as usize - 1];
    assert_eq!(gen.step_into(&vec![1; n], &mut short).unwrap_err().status, Status::InvalidArgument);
    // nothing changed: the session still steps, up to its budget of two rows
    gen.step(&vec![1; n]).unwrap();
    gen.step(&vec![2; n]).unwrap();
    let err = gen.step(&vec![3; n]).unwrap_err();
    assert!(err.message.contains("max_new_tokens"), "{err}");
    // finishing: out of range, twice; a step after every sequence finished
    assert_eq!(gen.finish(n).unwrap_err().status, Status::InvalidArgument);
    assert_eq!(gen.finish(usize::MAX).unwrap_err().status, Status::InvalidArgument);
    gen.finish(0).unwrap();
    let err = gen.finish(0).unwrap_err();
    assert!(err.message.contains("finished already"), "{err}");
    for s in 1..n {
        gen.finish(s).unwrap();
    }
    let err = gen.step(&[]).unwrap_err();
    assert!(err.message.contains("finished"), "{err}");
    // a second session on the context while one is open: leak one, then begin
    std::mem::forget(gen);
    let err = ctx.generate_begin(&plan, &GenerateParams::default()).unwrap_err();
    assert!(err.message.contains("session already"), "{err}");
    // clearing the cache is refused during a session
    assert_eq!(ctx.cache_clear().unwrap_err().status, Status::InvalidArgument);
    // a picked token outside the vocabulary stops generate with the step's error
    let mut other = f.model.context_with(plan.n_tokens, cached()).unwrap();
    let err = other.generate(&plan, &params(4, true), &[], |_, _| vocab).unwrap_err();
    assert!(err.message.contains("vocab_size"), "{err}");
    // and the context is usable afterwards (the session ended with the error)
    assert_eq!(other.generate_greedy(&plan, &params(f.max_new, true), &f.eos).unwrap(), f.want);
}
