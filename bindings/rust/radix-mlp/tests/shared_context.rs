//! `Context::new`: a context holding an `Arc` of its model, as a server keeps one per worker in a
//! struct or moves it into a `'static` thread. It keeps the model alive after the caller's handle
//! is gone, frees it with the last share, and computes what a borrowing context computes.
mod common;

use std::sync::Arc;
use std::thread;

use common::{max_abs_diff, Fixture, TOLERANCE};
use radix_mlp::{Context, Model, Plan, PlanParams, Planner, SharedContext};

fn fixture_plan(f: &Fixture) -> Plan {
    let params = PlanParams { threshold: 1.0, ..PlanParams::default() };
    Planner::new().unwrap().build(&f.input_ids, &f.position_ids, &f.cu_seqlens, &params).unwrap().to_owned()
}

#[test]
fn context_keeps_its_model_across_a_thread() {
    let f = Fixture::load("qwen3_tiny");
    let plan = fixture_plan(&f);
    let model = Arc::new(Model::load(&f.dir).unwrap());
    let size = plan.n_tokens * model.config().hidden_size;
    let mut want = vec![0.0; size];
    model.context(plan.n_tokens).unwrap().forward(&plan, &mut want).unwrap();

    let mut ctx = Context::new(Arc::clone(&model), plan.n_tokens).unwrap();
    let weak = Arc::downgrade(&model);
    drop(model); // the context's share keeps the model alive
    let worker = thread::spawn(move || {
        let mut out = vec![f32::NAN; size];
        ctx.forward(&plan, &mut out).unwrap();
        out // ctx (and with it the last share of the model) is dropped here
    });
    let got = worker.join().unwrap();
    assert_eq!(got, want, "a shared context computes what a borrowing one does");
    assert!(weak.upgrade().is_none(), "the model is freed with its last context");
}

/// What a server holds: the model and one context per worker, no borrows between them.
struct Server {
    model: Arc<Model>,
    workers: Vec<SharedContext>,
}

impl Server {
    fn new(dir: &std::path::Path, n_workers: usize, max_tokens: usize) -> Server {
        let model = Arc::new(Model::load(dir).unwrap());
        let workers = (0..n_workers).map(|_| Context::new(Arc::clone(&model), max_tokens).unwrap()).collect();
        Server { model, workers }
    }
}

#[test]
fn server_struct_runs_batches_on_each_worker() {
    let f = Fixture::load("qwen3_tiny");
    let plan = fixture_plan(&f);
    let server = Server::new(&f.dir, 3, plan.n_tokens);
    let size = plan.n_tokens * server.model.config().hidden_size;
    let plan = Arc::new(plan);
    let handles: Vec<_> = server
        .workers
        .into_iter()
        .map(|mut ctx| {
            let plan = Arc::clone(&plan);
            thread::spawn(move || {
                let mut out = vec![f32::NAN; size];
                ctx.forward(&*plan, &mut out).unwrap();
                out
            })
        })
        .collect();
    for handle in handles {
        let diff = max_abs_diff(&handle.join().unwrap(), &f.tensor("last_hidden").data);
        assert!(diff <= TOLERANCE, "a worker differs from transformers by {diff}");
    }
    assert_eq!(Arc::strong_count(&server.model), 1, "the workers' shares are gone with them");
}
