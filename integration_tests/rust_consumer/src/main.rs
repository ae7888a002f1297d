//! A host of libradix_mlp as a TEI-style server links it: plans a batch through the published
//! crate's function and a `Planner`; with the `model` feature it also runs a checkpoint (the path
//! given as the argument) with radix on and off and checks they agree. run.sh builds it shared,
//! static and planner-only, and checks what the binary loads.
use radix_mlp::{compute_fold_and_scatter, PlanParams, Planner};

fn main() {
    let (ids, pos, cu) = ([1, 2, 3, 1, 2, 4], [0, 1, 2, 0, 1, 2], [0, 3, 6]);
    let (compact_ids, _, scatter, fold) = compute_fold_and_scatter(&ids, &pos, &cu, None);
    assert_eq!((compact_ids.len(), fold.len()), (4, 4));
    for (i, &row) in scatter.iter().enumerate() {
        assert_eq!(compact_ids[row as usize], ids[i]);
    }
    let mut planner = Planner::new().expect("planner");
    let plan = planner.build(&ids, &pos, &cu, &PlanParams::default()).expect("plan");
    assert!(plan.use_radix() && plan.n_compact() == 4);
    println!("rust_consumer: radix_mlp {}: 6 tokens -> 4 compact rows", radix_mlp::version_string());
    #[cfg(feature = "model")]
    model::run(std::env::args().nth(1).expect("usage: rust-consumer CHECKPOINT_DIR"));
}

#[cfg(feature = "model")]
mod model {
    use radix_mlp::{Model, PlanParams, Planner};

    pub fn run(dir: String) {
        let model = Model::load(&dir).unwrap_or_else(|e| panic!("{dir}: {e}"));
        let (ids, pos, cu) = ([1, 2, 3, 1, 2, 4], [0, 1, 2, 0, 1, 2], [0, 3, 6]);
        let h = model.config().hidden_size;
        let mut ctx = model.context(ids.len()).expect("context");
        let mut planner = Planner::new().expect("planner");
        let mut outputs = Vec::new();
        for threshold in [1.0, 0.0] {
            let params = PlanParams { threshold, ..PlanParams::default() };
            let plan = planner.build(&ids, &pos, &cu, &params).expect("plan");
            let mut out = vec![f32::NAN; ids.len() * h];
            ctx.forward(&plan, &mut out).expect("forward");
            outputs.push(out);
        }
        let worst =
            outputs[0].iter().zip(&outputs[1]).map(|(a, b)| (a - b).abs() / (1.0 + b.abs())).fold(0.0, f32::max);
        assert!(worst <= 1e-5, "radix on and off differ by {worst}");
        let cuda = match radix_mlp::cuda_device_count() {
            Ok(n) => format!("{n} devices"),
            Err(e) => e.status.to_string(),
        };
        println!("rust_consumer: model ran, radix on and off agree within {worst:.2e}; CUDA: {cuda}");
    }
}
