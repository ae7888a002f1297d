//! One batch through the model on the backend thread's context: plan it (the library's planner, the
//! `RADIX_MLP_*` plan switches), run the forward with the library's attention (and the context's
//! prefix cache) or the host's (`rust_host::causal_gqa` between the library's layer pieces,
//! host_attention.rs), then pool each sequence and/or score it. A batch that reads only each
//! sequence's last token (last pooling, rerank scores) with the library's attention runs
//! `forward_last`, which computes the last layer's MLP on those rows only; otherwise, with radix on
//! the forward stays in compact space and reads the results through the plan's scatter, with radix
//! off it is the plain forward over the batch rows. The context's attention space is `Auto`
//! (compact when the plan shares rows), as `radixmlp run --attention auto`.
use std::sync::Arc;
use std::time::{Duration, Instant};

use radix_mlp::{
    AttentionSpace, CacheStats, Context, ContextParams, Error, Model, PairScore, PlanParams, Planner, Pooling,
    SharedContext,
};

use crate::config::{AttentionMode, Config};
use crate::host_attention::HostLayers;

/// What a batch gave.
#[derive(Debug, Default)]
pub struct BatchOutput {
    /// (n_seqs, hidden) pooled last hidden states, not normalized (empty when not asked).
    pub pooled: Vec<f32>,
    /// One per sequence (empty when not asked).
    pub scores: Vec<PairScore>,
    pub n_tokens: usize,
    pub n_compact: usize,
    pub use_radix: bool,
    /// Whether the batch ran `forward_last` (each sequence's last row only).
    pub last_rows: bool,
    /// The prefix cache during this batch: compact rows looked up, found, computed.
    pub cache_lookups: u64,
    pub cache_hits: u64,
    pub computed: u64,
    /// Time to plan, run the forward, pool and/or score (profile.rs).
    pub plan_time: Duration,
    pub forward_time: Duration,
    pub pool_time: Duration,
}

/// The backend's context, planner and buffer, reused batch after batch.
pub struct Runner {
    ctx: SharedContext,
    planner: Planner,
    params: PlanParams,
    attention: AttentionMode,
    pooling: Pooling,
    hidden: Vec<f32>,
    /// The layer pieces' buffers (`--attention host`).
    host_layers: HostLayers,
    /// Whether last-token batches run `forward_last` (the default; off: the whole forward, as for
    /// mean and cls pooling).
    last_rows: bool,
    /// 0, 1, 2, ...: the read-outs' cu_seqlens of `forward_last`'s one row per sequence.
    ones: Vec<u32>,
}

/// Which rows a batch's forward leaves in the runner's buffer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rows {
    /// Each sequence's last row (`forward_last`).
    Last,
    /// The compact rows (`forward_compact`, the host's layers), read through the plan's scatter.
    Compact,
    /// The batch rows (`forward` with radix off).
    Batch,
}

impl Runner {
    /// A context for batches of `--max-batch-tokens` with the prefix cache (library attention).
    pub fn new(model: Arc<Model>, cfg: &Config) -> Result<Runner, Error> {
        let params = ContextParams {
            cache_bytes: cfg.cache_bytes(),
            attention_space: AttentionSpace::Auto,
            ..ContextParams::default()
        };
        Ok(Runner {
            ctx: Context::new_with(model, cfg.max_batch_tokens, params)?,
            planner: Planner::new()?,
            params: cfg.plan,
            attention: cfg.attention,
            pooling: cfg.pooling,
            hidden: Vec::new(),
            host_layers: HostLayers::default(),
            last_rows: true,
            ones: Vec::new(),
        })
    }

    /// Whether batches that read only the last tokens run `forward_last` (on by default); off,
    /// they take the whole forward (tests compare the two).
    pub fn set_last_rows(&mut self, on: bool) {
        self.last_rows = on;
    }

    /// The context, for the batcher's preference for what its cache holds.
    pub fn context(&mut self) -> &mut SharedContext {
        &mut self.ctx
    }

    pub fn has_cache(&self) -> bool {
        self.ctx.cache_stats().map(|s| s.bytes_budget > 0).unwrap_or(false)
    }

    /// Runs one batch (sequences back to back, positions 0.. in each).
    pub fn run(
        &mut self,
        input_ids: &[u32],
        position_ids: &[u32],
        cu_seqlens: &[u32],
        pool: bool,
        score: Option<(u32, u32)>,
    ) -> Result<BatchOutput, Error> {
        let before = self.ctx.cache_stats()?;
        let h = self.ctx.model().config().hidden_size;
        let t0 = Instant::now();
        let plan = self.planner.build(input_ids, position_ids, cu_seqlens, &self.params)?;
        let t1 = Instant::now();
        let host = self.attention == AttentionMode::Host;
        let last_only = (pool || score.is_some()) && (!pool || self.pooling == Pooling::Last);
        let rows = if !host && self.last_rows && last_only {
            Rows::Last
        } else if host || plan.use_radix() {
            Rows::Compact
        } else {
            Rows::Batch
        };
        let mut out = BatchOutput {
            n_tokens: plan.n_tokens(),
            n_compact: plan.n_compact(),
            use_radix: plan.use_radix(),
            last_rows: rows == Rows::Last,
            ..BatchOutput::default()
        };
        match rows {
            Rows::Last => {
                self.hidden.resize(plan.n_seqs() * h, 0.0);
                self.ctx.forward_last(&plan, &mut self.hidden)?;
            }
            Rows::Compact if host => self.host_layers.run(&mut self.ctx, &plan, &mut self.hidden)?,
            Rows::Compact => {
                self.hidden.resize(plan.n_compact_padded() * h, 0.0);
                self.ctx.forward_compact(&plan, &mut self.hidden)?;
            }
            Rows::Batch => {
                self.hidden.resize(plan.n_tokens() * h, 0.0);
                self.ctx.forward(&plan, &mut self.hidden)?;
            }
        }
        let t2 = Instant::now();
        if rows == Rows::Compact {
            if pool {
                out.pooled = self.ctx.pool_compact(&plan, &self.hidden, self.pooling, false)?;
            }
            if let Some((a, b)) = score {
                out.scores = self.ctx.score_pair_compact(&plan, &self.hidden, a, b)?;
            }
        } else {
            // One row per sequence (any pooling of it is that row) or the batch rows.
            self.ones.extend(self.ones.len() as u32..=plan.n_seqs() as u32);
            let cu = if rows == Rows::Last { &self.ones[..=plan.n_seqs()] } else { cu_seqlens };
            if pool {
                out.pooled = self.ctx.model().pool(&self.hidden, cu, self.pooling, false)?;
            }
            if let Some((a, b)) = score {
                out.scores = self.ctx.score_pair(&self.hidden, cu, a, b)?;
            }
        }
        (out.plan_time, out.forward_time, out.pool_time) = (t1 - t0, t2 - t1, t2.elapsed());
        let after: CacheStats = self.ctx.cache_stats()?;
        out.cache_lookups = after.lookups - before.lookups;
        out.cache_hits = after.hit_tokens - before.hit_tokens;
        out.computed =
            if after.bytes_budget > 0 { after.computed_tokens - before.computed_tokens } else { out.n_compact as u64 };
        Ok(out)
    }
}
