//! The backend thread, TEI's shape: it loads the model (and starts the tokenizer workers), then owns
//! the one context with the prefix cache and the library's batcher. Each turn it takes the jobs the
//! routes sent (every sequence pushed into the batcher; a full batcher answers that job 429), drops
//! the sequences of clients that went away, takes the next batch (preferring what the context's
//! cache holds), runs it (forward.rs) and answers every job whose last sequence ran. A failed batch
//! answers its jobs 424 with the library's message; the thread goes on. When the routes' channel
//! closes (shutdown) it answers everything still queued, then stops.
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use radix_mlp::{Batcher, BatcherParams, Model, Status};
use serde_json::json;

use crate::config::{AttentionMode, Config};
use crate::errors::{ApiError, ErrorKind};
use crate::forward::{BatchOutput, Runner};
use crate::queue::{Job, JobOutput, Reply, SeqOutput, Task, SEQ_INDEX_BITS};
use crate::server::State;
use crate::tokenizer::TokenizerPool;

/// What the routes need of the loaded model.
pub struct Loaded {
    /// `GET /info`.
    pub info: serde_json::Value,
    pub vocab_size: usize,
    pub max_input_length: usize,
    pub tokenizer: Option<TokenizerPool>,
    /// The rerank score's token pair, when the model has an LM head and the pair is known.
    pub score_tokens: Option<(u32, u32)>,
}

/// A job being served: its outputs as they come.
struct Pending {
    task: Task,
    outputs: Vec<Option<SeqOutput>>,
    remaining: usize,
    reply: tokio::sync::oneshot::Sender<Reply>,
    sent_at: Instant,
    first_batch: Option<Instant>,
    inference: Duration,
    /// The last batch whose time `inference` counts.
    last_batch: u64,
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
    let loaded = Loaded { info, vocab_size: mc.vocab_size, max_input_length, tokenizer, score_tokens };
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
        jobs: HashMap::new(),
        next_key: 0,
        queued: 0,
        clock: Instant::now(),
        batch: BatchBuffers::default(),
        batch_no: 0,
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
    jobs: HashMap<u64, Pending>,
    next_key: u64,
    /// Sequences in the batcher.
    queued: usize,
    clock: Instant,
    batch: BatchBuffers,
    /// Batches run so far.
    batch_no: u64,
}

const INDEX_MASK: u64 = (1 << SEQ_INDEX_BITS) - 1;

impl Backend {
    fn serve(&mut self, jobs: &Receiver<Job>) {
        loop {
            if self.queued == 0 {
                match jobs.recv() {
                    Ok(job) => self.accept(job),
                    Err(_) => return, // closed and nothing left
                }
            }
            loop {
                match jobs.try_recv() {
                    Ok(job) => self.accept(job),
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
            self.drop_abandoned();
            self.run_batch();
            self.state.metrics.queue_size.set(self.queued as i64);
        }
    }

    fn now_us(&self) -> u64 {
        self.clock.elapsed().as_micros() as u64
    }

    /// Pushes every sequence of `job` into the batcher, or answers it with why not.
    fn accept(&mut self, job: Job) {
        let key = self.next_key;
        self.next_key += 1;
        let now = self.now_us();
        for (i, seq) in job.sequences.iter().enumerate() {
            if let Err(e) = self.batcher.push(key << SEQ_INDEX_BITS | i as u64, seq, now) {
                for j in 0..i {
                    let _ = self.batcher.remove(key << SEQ_INDEX_BITS | j as u64);
                }
                let error = match e.status {
                    Status::Full => ApiError::overloaded(format!("the batch queue is full: {}", e.message)),
                    Status::TooLarge => ApiError::too_large(e.message),
                    _ => ApiError::validation(e.message),
                };
                let _ = job.reply.send(Err(error));
                return;
            }
        }
        let n = job.sequences.len();
        self.queued += n;
        let pending = Pending {
            task: job.task,
            outputs: vec![None; n],
            remaining: n,
            reply: job.reply,
            sent_at: job.sent_at,
            first_batch: None,
            inference: Duration::ZERO,
            last_batch: u64::MAX,
        };
        self.jobs.insert(key, pending);
    }

    /// Takes the unrun sequences of `key` out of the batcher and forgets the job.
    fn forget(&mut self, key: u64) -> Option<Pending> {
        let job = self.jobs.remove(&key)?;
        for (i, _) in job.outputs.iter().enumerate().filter(|(_, o)| o.is_none()) {
            if self.batcher.remove(key << SEQ_INDEX_BITS | i as u64).is_ok() {
                self.queued -= 1;
            }
        }
        Some(job)
    }

    /// Jobs whose client went away (the route's future was dropped).
    fn drop_abandoned(&mut self) {
        let gone: Vec<u64> = self.jobs.iter().filter(|(_, j)| j.reply.is_closed()).map(|(&k, _)| k).collect();
        for key in gone {
            self.forget(key);
        }
    }

    fn run_batch(&mut self) {
        let cfg = &self.state.config;
        let (max_tokens, max_seqs) = (cfg.max_batch_tokens, cfg.max_batch_requests.unwrap_or(cfg.max_batch_tokens));
        let max_rows = cfg.max_batch_rows.unwrap_or(max_tokens); // rows never exceed tokens: no bound
        let now = self.now_us();
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
        self.queued -= self.batch.ids.len();
        self.batch_no += 1;
        let task_of = |id: &u64| self.jobs.get(&(id >> SEQ_INDEX_BITS)).map(|j| j.task);
        let pool = self.batch.ids.iter().any(|id| task_of(id) == Some(Task::Embed));
        let score = self.batch.ids.iter().find_map(|id| match task_of(id) {
            Some(Task::Score(a, b)) => Some((a, b)),
            _ => None,
        });
        let m = &self.state.metrics;
        m.batch_next_size.observe(self.batch.ids.len() as f64);
        m.batch_next_tokens.observe(self.batch.input_ids.len() as f64);
        m.batch_inference_count.inc();
        let start = Instant::now();
        let b = &self.batch;
        let result = self.runner.run(&b.input_ids, &b.position_ids, &b.cu_seqlens, pool, score);
        let took = start.elapsed();
        m.batch_inference_duration.observe(took.as_secs_f64());
        match result {
            Ok(out) => {
                m.batch_inference_success.inc();
                m.compression_ratio.observe(out.n_compact as f64 / out.n_tokens.max(1) as f64);
                m.batch_radix.with_label_values(&[if out.use_radix { "radix" } else { "identity" }]).inc();
                m.cache_lookup_tokens.inc_by(out.cache_lookups);
                m.cache_hit_tokens.inc_by(out.cache_hits);
                m.computed_tokens.inc_by(out.computed);
                self.deliver(&out, start, took);
            }
            Err(e) => {
                let keys: Vec<u64> = self.batch.ids.iter().map(|id| id >> SEQ_INDEX_BITS).collect();
                for key in keys {
                    if let Some(job) = self.forget(key) {
                        let message = format!("inference failed: {e}");
                        let _ = job.reply.send(Err(ApiError::new(ErrorKind::Backend, message)));
                    }
                }
            }
        }
    }

    /// Hands each sequence its output and answers the jobs that are complete.
    fn deliver(&mut self, out: &BatchOutput, start: Instant, took: Duration) {
        let n_seqs = self.batch.ids.len();
        let h = if n_seqs > 0 { out.pooled.len() / n_seqs } else { 0 };
        for s in 0..n_seqs {
            let id = self.batch.ids[s];
            let key = id >> SEQ_INDEX_BITS;
            let Some(job) = self.jobs.get_mut(&key) else { continue };
            let output = match job.task {
                Task::Embed => SeqOutput::Embedding(out.pooled[s * h..(s + 1) * h].to_vec()),
                Task::Score(..) => SeqOutput::Score(out.scores[s]),
            };
            job.outputs[(id & INDEX_MASK) as usize] = Some(output);
            job.remaining -= 1;
            job.first_batch.get_or_insert(start);
            if job.last_batch != self.batch_no {
                job.last_batch = self.batch_no;
                job.inference += took;
            }
            if job.remaining == 0 {
                let job = self.jobs.remove(&key).expect("present");
                let queue = job.first_batch.map_or(Duration::ZERO, |t| t.saturating_duration_since(job.sent_at));
                let outputs = job.outputs.into_iter().map(|o| o.expect("every sequence ran")).collect();
                let _ = job.reply.send(Ok(JobOutput { outputs, queue, inference: job.inference }));
            }
        }
    }
}
