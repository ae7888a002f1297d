//! The backend's forward on batches that read only each sequence's last token (rerank scores,
//! last pooling): `forward_last` against the whole forward the runner takes otherwise, with radix
//! on and off, with and without the prefix cache (and again from the cache); mean pooling keeps
//! the whole forward.
use std::sync::Arc;

use radix_mlp::{Gate, Model, PlanParams, Pooling};
use tei_host::forward::{BatchOutput, Runner};

mod common;

/// Three sequences sharing an 8-token prefix, one sharing 3 of it, one alone.
fn batch() -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let prefix: &[u32] = &[11, 12, 13, 14, 15, 16, 17, 18];
    let seqs: Vec<Vec<u32>> = vec![
        [prefix, &[21, 22, 23]].concat(),
        [prefix, &[31]].concat(),
        [prefix, &[41, 42, 43, 44, 45]].concat(),
        [&prefix[..3], &[51, 52]].concat(),
        vec![7, 8, 9, 10],
    ];
    let ids = seqs.concat();
    let pos = seqs.iter().flat_map(|s| 0..s.len() as u32).collect();
    let mut cu = vec![0];
    for s in &seqs {
        cu.push(cu.last().unwrap() + s.len() as u32);
    }
    (ids, pos, cu)
}

fn runner(model: &Arc<Model>, threshold: f64, cache_mb: u64, pooling: Pooling, last_rows: bool) -> Runner {
    let cfg = common::config(|c| {
        c.plan = PlanParams { threshold, pad_multiple_of: Some(8), gate: Gate::Distinct };
        c.cache_mb = cache_mb;
        c.pooling = pooling;
    });
    let mut r = Runner::new(Arc::clone(model), &cfg).unwrap();
    r.set_last_rows(last_rows);
    r
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn assert_close(got: &BatchOutput, want: &BatchOutput, what: &str) {
    let scale = want.pooled.iter().fold(1.0f32, |m, x| m.max(x.abs()));
    let diff = max_diff(&got.pooled, &want.pooled);
    assert!(diff <= 1e-5 * scale, "{what}: pooled differs by {diff}");
    assert_eq!(got.scores.len(), want.scores.len(), "{what}");
    for (g, w) in got.scores.iter().zip(&want.scores) {
        let diff = (g.logit_a - w.logit_a).abs().max((g.logit_b - w.logit_b).abs()).max((g.prob_a - w.prob_a).abs());
        assert!(diff <= 1e-5 * w.logit_a.abs().max(w.logit_b.abs()).max(1.0), "{what}: {g:?} vs {w:?}");
    }
}

#[test]
fn last_token_batches_run_forward_last_and_match_the_whole_forward() {
    let model = Arc::new(Model::load(common::fixture("qwen3_tiny")).unwrap());
    let (ids, pos, cu) = batch();
    let n_seqs = cu.len() - 1;
    for threshold in [1.0, 0.0] {
        for cache_mb in [0, 64] {
            let what = format!("threshold {threshold}, cache {cache_mb} MB");
            let mut new = runner(&model, threshold, cache_mb, Pooling::Last, true);
            let mut old = runner(&model, threshold, cache_mb, Pooling::Last, false);
            // Twice: with a cache the second batch reads its rows from it.
            for round in 0..2 {
                for (pool, score) in [(true, None), (false, Some((1, 2))), (true, Some((1, 2)))] {
                    let got = new.run(&ids, &pos, &cu, pool, score).unwrap();
                    let want = old.run(&ids, &pos, &cu, pool, score).unwrap();
                    assert!(got.last_rows && !want.last_rows, "{what}: the paths taken");
                    assert_eq!(got.use_radix, threshold > 0.5, "{what}");
                    assert_eq!((got.pooled.len(), got.scores.len()), (want.pooled.len(), want.scores.len()));
                    assert_eq!(got.pooled.len(), if pool { n_seqs * 64 } else { 0 });
                    assert_eq!(got.scores.len(), if score.is_some() { n_seqs } else { 0 });
                    assert_close(&got, &want, &format!("{what}, round {round}, pool {pool}, score {score:?}"));
                }
            }
        }
    }
}

#[test]
fn mean_pooling_keeps_the_whole_forward() {
    let model = Arc::new(Model::load(common::fixture("qwen3_tiny")).unwrap());
    let (ids, pos, cu) = batch();
    for threshold in [1.0, 0.0] {
        let mut r = runner(&model, threshold, 0, Pooling::Mean, true);
        let got = r.run(&ids, &pos, &cu, true, None).unwrap();
        assert!(!got.last_rows, "mean pooling reads every row");
        // A rerank batch on the same runner reads only the last rows.
        let scored = r.run(&ids, &pos, &cu, false, Some((1, 2))).unwrap();
        assert!(scored.last_rows);
        // ... and its mean pooling is the whole forward's.
        let mut old = runner(&model, threshold, 0, Pooling::Mean, false);
        assert_close(&got, &old.run(&ids, &pos, &cu, true, None).unwrap(), "mean");
    }
}
