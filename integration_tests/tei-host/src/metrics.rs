//! `GET /metrics`: Prometheus text with TEI's metric names (te_request_*, te_embed_*, te_queue_size,
//! te_batch_next_*, te_batch_inference_*, and `te_radix_mlp_compression_ratio`, the histogram of
//! compact rows over tokens per batch with TEI's buckets), plus the prefix cache's counters
//! (`te_radix_mlp_cache_*`), the batcher's gauges (`te_radix_mlp_batcher_*`) and the per-batch
//! profile (`te_radix_mlp_batch_stage_duration{stage}`, `te_radix_mlp_batch_compact_rows`:
//! profile.rs), on a registry of the host's own (one per server, so tests can run several).
use prometheus::{
    exponential_buckets, Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts,
    Registry, TextEncoder,
};

pub struct Metrics {
    registry: Registry,
    pub request_count: IntCounterVec,
    pub request_success: IntCounterVec,
    pub request_failure: IntCounterVec,
    pub request_duration: Histogram,
    pub request_tokenization_duration: Histogram,
    pub request_queue_duration: Histogram,
    pub request_inference_duration: Histogram,
    pub request_input_length: Histogram,
    pub embed_count: IntCounter,
    pub embed_success: IntCounter,
    pub predict_count: IntCounter,
    pub predict_success: IntCounter,
    /// Sequences of live requests waiting (queue.rs: from the send to their batch).
    pub queue_size: IntGauge,
    /// What the library's batcher holds now (one batch's budget at most: fairness.rs).
    pub batcher_sequences: IntGauge,
    pub batcher_tokens: IntGauge,
    pub batch_next_size: Histogram,
    pub batch_next_tokens: Histogram,
    pub batch_inference_duration: Histogram,
    pub batch_inference_count: IntCounter,
    pub batch_inference_success: IntCounter,
    pub compression_ratio: Histogram,
    /// Compact rows the prefix cache was asked for, found, and computed.
    pub cache_lookup_tokens: IntCounter,
    pub cache_hit_tokens: IntCounter,
    pub computed_tokens: IntCounter,
    /// Batches with radix on / off, by the gate.
    pub batch_radix: IntCounterVec,
    /// The per-batch profile (profile.rs): each stage's time, and N' per batch.
    pub batch_stage_duration: HistogramVec,
    pub batch_compact_rows: Histogram,
}

fn counter(r: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("metric name");
    r.register(Box::new(c.clone())).expect("registered once");
    c
}

fn counter_vec(r: &Registry, name: &str, help: &str, label: &str) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), &[label]).expect("metric name");
    r.register(Box::new(c.clone())).expect("registered once");
    c
}

fn gauge(r: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("metric name");
    r.register(Box::new(g.clone())).expect("registered once");
    g
}

fn histogram(r: &Registry, name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    let h = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets)).expect("metric name");
    r.register(Box::new(h.clone())).expect("registered once");
    h
}

fn histogram_vec(r: &Registry, name: &str, help: &str, label: &str, buckets: Vec<f64>) -> HistogramVec {
    let h = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), &[label]).expect("metric name");
    r.register(Box::new(h.clone())).expect("registered once");
    h
}

/// TEI's duration buckets: 35 steps of x1.5 from 15 us.
fn durations() -> Vec<f64> {
    exponential_buckets(0.000015, 1.5, 35).expect("valid buckets")
}

fn powers_of_two(n: i32) -> Vec<f64> {
    (0..n).map(|x| 2f64.powi(x)).collect()
}

/// TEI's buckets of `te_radix_mlp_compression_ratio` (compact rows / tokens, 0 to 1).
const COMPRESSION_BUCKETS: [f64; 22] = [
    0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.91, 0.92, 0.93, 0.94, 0.95, 0.96, 0.97, 0.98, 0.99,
    1.0,
];

impl Metrics {
    pub fn new(max_input_length: usize) -> Metrics {
        let r = Registry::new();
        let lengths: Vec<f64> = powers_of_two(20).into_iter().filter(|&x| x as usize <= max_input_length).collect();
        Metrics {
            queue_size: gauge(&r, "te_queue_size", "Sequences of live requests waiting for a batch"),
            batcher_sequences: gauge(&r, "te_radix_mlp_batcher_sequences", "Sequences in the batcher"),
            batcher_tokens: gauge(&r, "te_radix_mlp_batcher_tokens", "Token ids in the batcher"),
            request_count: counter_vec(&r, "te_request_count", "Requests received", "method"),
            request_success: counter_vec(&r, "te_request_success", "Requests answered", "method"),
            request_failure: counter_vec(&r, "te_request_failure", "Requests failed, by reason", "err"),
            request_duration: histogram(&r, "te_request_duration", "Request time (s)", durations()),
            request_tokenization_duration: histogram(
                &r,
                "te_request_tokenization_duration",
                "Tokenization time per request (s)",
                durations(),
            ),
            request_queue_duration: histogram(
                &r,
                "te_request_queue_duration",
                "Queue time per request (s)",
                durations(),
            ),
            request_inference_duration: histogram(
                &r,
                "te_request_inference_duration",
                "Inference time per request (s)",
                durations(),
            ),
            request_input_length: histogram(&r, "te_request_input_length", "Tokens per input", lengths),
            embed_count: counter(&r, "te_embed_count", "Embedding requests"),
            embed_success: counter(&r, "te_embed_success", "Embedding requests answered"),
            predict_count: counter(&r, "te_predict_count", "Rerank requests"),
            predict_success: counter(&r, "te_predict_success", "Rerank requests answered"),
            batch_next_size: histogram(&r, "te_batch_next_size", "Sequences per batch", powers_of_two(13)),
            batch_next_tokens: histogram(&r, "te_batch_next_tokens", "Tokens per batch", powers_of_two(21)),
            batch_inference_duration: histogram(
                &r,
                "te_batch_inference_duration",
                "Forward time per batch (s)",
                durations(),
            ),
            batch_inference_count: counter(&r, "te_batch_inference_count", "Batches run"),
            batch_inference_success: counter(&r, "te_batch_inference_success", "Batches run without an error"),
            compression_ratio: histogram(
                &r,
                "te_radix_mlp_compression_ratio",
                "Compact rows over tokens per batch (RadixMLP)",
                COMPRESSION_BUCKETS.to_vec(),
            ),
            cache_lookup_tokens: counter(
                &r,
                "te_radix_mlp_cache_lookup_tokens",
                "Compact rows looked up in the prefix cache",
            ),
            cache_hit_tokens: counter(&r, "te_radix_mlp_cache_hit_tokens", "Compact rows found in the prefix cache"),
            computed_tokens: counter(&r, "te_radix_mlp_computed_tokens", "Compact rows computed"),
            batch_radix: counter_vec(&r, "te_radix_mlp_batches", "Batches by the plan's gate", "gate"),
            batch_stage_duration: histogram_vec(
                &r,
                "te_radix_mlp_batch_stage_duration",
                "Time per batch in each stage (s): wait, take, plan, forward, pool, answer",
                "stage",
                durations(),
            ),
            batch_compact_rows: histogram(
                &r,
                "te_radix_mlp_batch_compact_rows",
                "Compact rows per batch",
                powers_of_two(21),
            ),
            registry: r,
        }
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut out).expect("text encoding into memory");
        out
    }
}
