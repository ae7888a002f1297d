//! The per-batch profile (issue 51): where each batch's time goes on the backend thread, to set the
//! server's throughput against the library's forward on the same batches. For every batch: its
//! sequences, token ids (N) and compact rows (N'), whether the plan's gate took radix, the wait of
//! its oldest request (from the route's send to this batch), and the time to take it from the
//! batcher, plan it, run the forward, pool or score it and answer its jobs. Always observed into
//! `te_radix_mlp_batch_stage_duration{stage}` and `te_radix_mlp_batch_compact_rows` (/metrics);
//! with `--profile-batches`, also one line per batch on stderr: `tei-host: batch {json}`.
use std::time::Duration;

use serde_json::json;

use crate::metrics::Metrics;

#[derive(Debug, Default, Clone)]
pub struct BatchProfile {
    pub seqs: usize,
    pub tokens: usize,
    pub compact: usize,
    pub radix: bool,
    /// The oldest request's time from the route's send to this batch.
    pub wait: Duration,
    /// The batcher's choice of the batch and its copy.
    pub take: Duration,
    pub plan: Duration,
    pub forward: Duration,
    /// Pooling and/or the rerank scores.
    pub pool: Duration,
    /// Handing the outputs to their jobs and answering the complete ones.
    pub answer: Duration,
}

/// The stages, in order, as the metric's label and the line's keys (`<stage>_ms`).
pub const STAGES: [&str; 6] = ["wait", "take", "plan", "forward", "pool", "answer"];

impl BatchProfile {
    fn stages(&self) -> [Duration; 6] {
        [self.wait, self.take, self.plan, self.forward, self.pool, self.answer]
    }

    /// Into the histograms.
    pub fn observe(&self, m: &Metrics) {
        for (name, d) in STAGES.iter().zip(self.stages()) {
            m.batch_stage_duration.with_label_values(&[name]).observe(d.as_secs_f64());
        }
        m.batch_compact_rows.observe(self.compact as f64);
    }

    /// The JSON of batch `batch_no` (times in ms).
    pub fn line(&self, batch_no: u64) -> String {
        let mut v = json!({
            "batch": batch_no, "seqs": self.seqs, "tokens": self.tokens, "compact": self.compact, "radix": self.radix,
        });
        for (name, d) in STAGES.iter().zip(self.stages()) {
            v[format!("{name}_ms")] = json!((d.as_secs_f64() * 1e6).round() / 1e3);
        }
        v.to_string()
    }
}
