//! The backend thread, TEI's shape: it loads the model (and starts the tokenizer workers), then owns
//! the one context with the prefix cache and the library's batcher. Each turn it takes the jobs the
//! routes sent (jobs.rs: a job whose client has gone is dropped, a full queue answers 429), drops
//! the jobs of clients that went away, moves sequences into the batcher in turns up to one batch's
//! budget (fairness.rs), takes the next batch (preferring what the context's cache holds), runs it
//! (forward.rs) and answers every job whose last sequence ran. A failed batch answers its jobs 424
//! with the library's message; the thread goes on. When the routes' channel closes (shutdown) it
//! answers everything still queued, then stops.
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::Instant;

use radix_mlp::{Batcher, BatcherParams, Model};
use serde_json::json;

use crate::config::{AttentionMode, Config};
use crate::errors::{ApiError, ErrorKind};
use crate::forward::Runner;
use crate::jobs::Jobs;
use crate::profile::BatchProfile;
use crate::queue::{Job, Task};
use crate::server::State;
use crate::tokenizer::TokenizerPool;

/// What the routes need of the loaded model.
pub struct Loaded {
    /// `GET /info`.
    pub info: serde_json::Value,
    pub vocab_size: usize,
    /// The embeddings' dimensions (what `dimensions` may shorten).
    pub hidden_size: usize,
    pub max_input_length: usize,
    pub tokenizer: Option<TokenizerPool>,
    /// The rerank score's token pair, when the model has an LM head and the pair is known.
    pub score_tokens: Option<(u32, u32)>,
}

/// Loads the model, the context and the tokenizer; `Err` says what failed.
fn load(cfg: &Config) -> Result<(Loaded, Runner), String> {
    let model = Arc::new(Model::load(&cfg.model).map_err(|e| format!("cannot load {}: {e}", cfg.model.display()))?);
    let mc = model.config().clone();
    let runner = Runner::new(Arc::clone(&model), cfg).map_err(|e| format!("cannot create a context: {e}"))?;
    let tokenizer = match &cfg.tokenizer {
        Some(path) => Some(TokenizerPool::start(&cfg.python, path, cfg.tokenization_workers)?),
        None => None,
    };
    let score_tokens = match (cfg.score_tokens, &tokenizer) {
        _ if !mc.has_lm_head => None,
        (Some(pair), _) => Some(pair),
        (None, Some(t)) => {
            let id = |w: &str| t.token_to_id(w).ok().flatten();
            id(&cfg.score_words.0).zip(id(&cfg.score_words.1))
        }
        (None, None) => None,
    };
    if let Some((a, b)) = score_tokens {
        if a as usize >= mc.vocab_size || b as usize >= mc.vocab_size {
            return Err(format!("--score-tokens {a},{b}: the model's vocabulary has {} ids", mc.vocab_size));
        }
    }
    let max_input_length = cfg.max_input_length.unwrap_or(mc.max_position_embeddings.min(cfg.max_batch_tokens));
    let info = json!({
        "model_id": cfg.model_id,
        "model_sha": null,
        "model_dtype": "float32",
        "model_type": { "embedding": { "pooling": format!("{:?}", cfg.pooling).to_lowercase() } },
        "max_concurrent_requests": cfg.max_concurrent_requests,
        "max_input_length": max_input_length,
        "max_batch_tokens": cfg.max_batch_tokens,
        "max_batch_requests": cfg.max_batch_requests,
        "max_client_batch_size": cfg.max_client_batch_size,
        "auto_truncate": cfg.auto_truncate,
        "tokenization_workers": tokenizer.as_ref().map(|_| cfg.tokenization_workers),
        "version": env!("CARGO_PKG_VERSION"),
        "sha": null,
        "docker_label": null,
        "radix_mlp": {
            "library_version": radix_mlp::version_string(),
            "attention": if cfg.attention == AttentionMode::Host { "host" } else { "library" },
            "prefix_cache_mb": cfg.cache_bytes() >> 20,
            "batcher": format!("{:?}", cfg.batch_mode).to_lowercase(),
            "max_wait_ms": cfg.max_wait.as_millis() as u64,
            "max_batch_rows": cfg.max_batch_rows,
            "threshold": cfg.plan.threshold,
            "pad_multiple_of": cfg.plan.pad_multiple_of,
            "score_tokens": score_tokens.map(|(a, b)| [a, b]),
            "vocab_size": mc.vocab_size,
            "hidden_size": mc.hidden_size,
        },
    });
    let loaded = Loaded {
        info,
        vocab_size: mc.vocab_size,
        hidden_size: mc.hidden_size,
        max_input_length,
        tokenizer,
        score_tokens,
    };
    Ok((loaded, runner))
}

/// The backend thread's body: load (`failed` with the reason when that fails), then serve `jobs`
/// until the channel closes.
pub fn main(state: Arc<State>, jobs: Receiver<Job>, failed: Box<dyn FnOnce(String) + Send>) {
    let cfg = &state.config;
    let (loaded, runner) = match load(cfg) {
        Ok(x) => x,
        Err(e) => {
            state.backend_alive.store(false, Ordering::SeqCst);
            failed(e);
            return;
        }
    };
    let params = BatcherParams {
        mode: cfg.batch_mode,
        max_requests: cfg.max_queued_requests(),
        max_queued_tokens: cfg.max_queued_tokens as u32,
        max_wait_us: cfg.max_wait.as_micros() as u64,
    };
    let batcher = match Batcher::new(&params) {
        Ok(b) => b,
        Err(e) => {
            state.backend_alive.store(false, Ordering::SeqCst);
            failed(format!("cannot create the batcher: {e}"));
            return;
        }
    };
    std::thread::sleep(cfg.load_delay);
    let use_cache = runner.has_cache();
    let _ = state.loaded.set(loaded);
    eprintln!("tei-host: ready ({})", cfg.model.display());
    let mut backend = Backend {
        state: Arc::clone(&state),
        batcher,
        runner,
        use_cache,
        jobs: Jobs::default(),
        clock: Instant::now(),
        batch: BatchBuffers::default(),
        batch_no: 0,
        tokens_per_row: 1.0,
    };
    backend.serve(&jobs);
    state.backend_alive.store(false, Ordering::SeqCst);
}

/// A batch copied out of the batcher.
#[derive(Default)]
struct BatchBuffers {
    ids: Vec<u64>,
    input_ids: Vec<u32>,
    position_ids: Vec<u32>,
    cu_seqlens: Vec<u32>,
}

struct Backend {
    state: Arc<State>,
    batcher: Batcher,
    runner: Runner,
    use_cache: bool,
    jobs: Jobs,
    clock: Instant,
    batch: BatchBuffers,
    /// Batches run so far.
    batch_no: u64,
    /// Token ids per compact row of the recent batches (a running mean, 1 at first): with a row
    /// bound, the batcher is filled with about one batch's tokens (`fill_tokens`).
    tokens_per_row: f64,
}

impl Backend {
    fn serve(&mut self, channel: &Receiver<Job>) {
        let state = Arc::clone(&self.state);
        let cfg = &state.config;
        let max_tokens = cfg.max_batch_tokens;
        let max_seqs = cfg.max_batch_requests.unwrap_or(max_tokens);
        loop {
            if self.jobs.is_empty() {
                match channel.recv() {
                    Ok(job) => self.jobs.accept(job, self.now_us(), cfg.max_queued_tokens),
                    Err(_) => return, // closed and nothing left
                }
            }
            loop {
                match channel.try_recv() {
                    Ok(job) => self.jobs.accept(job, self.now_us(), cfg.max_queued_tokens),
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
            self.jobs.drop_abandoned(&mut self.batcher);
            let fill = self.fill_tokens(max_tokens);
            self.jobs.fill(&mut self.batcher, fill, max_seqs);
            self.run_batch(max_tokens, max_seqs);
            self.show_batcher();
        }
    }

    /// The tokens the batcher may hold: one batch's. That is `max_tokens`, or under a row bound R
    /// the tokens of about R compact rows at the recent batches' sharing, so that a request that
    /// arrives behind a long one still finds the next batch (fairness.rs).
    fn fill_tokens(&self, max_tokens: usize) -> usize {
        match self.state.config.max_batch_rows {
            Some(rows) if rows < max_tokens => ((rows as f64 * self.tokens_per_row) as usize).clamp(rows, max_tokens),
            _ => max_tokens,
        }
    }

    fn now_us(&self) -> u64 {
        self.clock.elapsed().as_micros() as u64
    }

    /// The batcher's gauges.
    fn show_batcher(&mut self) {
        if let Ok((seqs, tokens)) = self.batcher.pending() {
            self.state.metrics.batcher_sequences.set(seqs as i64);
            self.state.metrics.batcher_tokens.set(tokens as i64);
        }
    }

    fn run_batch(&mut self, max_tokens: usize, max_seqs: usize) {
        let max_rows = self.state.config.max_batch_rows.unwrap_or(max_tokens); // rows never exceed tokens: no bound
        let now = self.now_us();
        let take_start = Instant::now();
        let taken = if self.use_cache {
            self.batcher.next_batch_rows_with_cache(self.runner.context(), max_tokens, max_rows, max_seqs, now)
        } else {
            self.batcher.next_batch_rows(max_tokens, max_rows, max_seqs, now)
        };
        let b = &mut self.batch;
        match taken {
            Ok(batch) => {
                b.ids.clear();
                b.ids.extend_from_slice(batch.ids());
                b.input_ids.clear();
                b.input_ids.extend_from_slice(batch.input_ids());
                b.position_ids.clear();
                b.position_ids.extend_from_slice(batch.position_ids());
                b.cu_seqlens.clear();
                b.cu_seqlens.extend_from_slice(batch.cu_seqlens());
            }
            Err(e) => {
                eprintln!("tei-host: the batcher failed: {e}");
                return;
            }
        }
        if self.batch.ids.is_empty() {
            return;
        }
        let take = take_start.elapsed();
        let wait = self.jobs.oldest_sent(&self.batch.ids).map_or(Default::default(), |t| take_start.duration_since(t));
        let lengths = self.batch.cu_seqlens.windows(2).map(|w| (w[1] - w[0]) as usize);
        self.jobs.taken(&self.batch.ids, lengths);
        self.show_batcher();
        self.batch_no += 1;
        let b = &self.batch;
        let pool = b.ids.iter().any(|&id| self.jobs.task_of(id) == Some(Task::Embed));
        let score = b.ids.iter().find_map(|&id| match self.jobs.task_of(id) {
            Some(Task::Score(a, b)) => Some((a, b)),
            _ => None,
        });
        let m = &self.state.metrics;
        m.batch_next_size.observe(b.ids.len() as f64);
        m.batch_next_tokens.observe(b.input_ids.len() as f64);
        m.batch_inference_count.inc();
        std::thread::sleep(self.state.config.batch_pause);
        let start = Instant::now();
        let result = self.runner.run(&b.input_ids, &b.position_ids, &b.cu_seqlens, pool, score);
        let took = start.elapsed();
        m.batch_inference_duration.observe(took.as_secs_f64());
        match result {
            Ok(out) => {
                m.batch_inference_success.inc();
                m.compression_ratio.observe(out.n_compact as f64 / out.n_tokens.max(1) as f64);
                if out.n_compact > 0 {
                    let ratio = out.n_tokens as f64 / out.n_compact as f64;
                    self.tokens_per_row = 0.75 * self.tokens_per_row + 0.25 * ratio;
                }
                m.batch_radix.with_label_values(&[if out.use_radix { "radix" } else { "identity" }]).inc();
                m.cache_lookup_tokens.inc_by(out.cache_lookups);
                m.cache_hit_tokens.inc_by(out.cache_hits);
                m.computed_tokens.inc_by(out.computed);
                let answer = Instant::now();
                self.jobs.deliver(&b.ids, &out, self.batch_no, start, took);
                let profile = BatchProfile {
                    seqs: b.ids.len(),
                    tokens: out.n_tokens,
                    compact: out.n_compact,
                    radix: out.use_radix,
                    wait,
                    take,
                    plan: out.plan_time,
                    forward: out.forward_time,
                    pool: out.pool_time,
                    answer: answer.elapsed(),
                };
                profile.observe(m);
                if self.state.config.profile_batches {
                    eprintln!("tei-host: batch {}", profile.line(self.batch_no));
                }
            }
            Err(e) => {
                let error = ApiError::new(ErrorKind::Backend, format!("inference failed: {e}"));
                self.jobs.fail(&b.ids, &error, &mut self.batcher);
            }
        }
    }
}
