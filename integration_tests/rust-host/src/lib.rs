//! A host that drives libradix_mlp the way text-embeddings-inference's candle backend would,
//! through the safe `radix-mlp` crate, std only:
//!
//! - [`serve`]: a queue thread with its own [`Planner`] builds the plan of batch k+1 (an owned
//!   [`Plan`] sent over a channel) while the backend runs batch k; a batch that fails (bad
//!   `cu_seqlens`, a token id past the vocabulary, too many tokens) gets its error and the next
//!   batch is served;
//! - [`Backend::run`]: the library's per-layer entry points (embed, pre-attention,
//!   post-attention, final norm) around the host's own attention, [`causal_gqa`], then pooling.
//!
//! Any number of threads may each `serve` on one shared [`Model`].
use std::sync::mpsc;
use std::thread;

use radix_mlp::{AttentionArgs, Context, Error, Model, Plan, PlanParams, Planner, Pooling};

/// A batch as the queue hands it to the backend: sequences back to back.
#[derive(Clone, Debug)]
pub struct Batch {
    pub id: usize,
    pub input_ids: Vec<u32>,
    pub position_ids: Vec<u32>,
    pub cu_seqlens: Vec<u32>,
}

impl Batch {
    /// A batch of token sequences, positions 0..len in each.
    pub fn from_sequences(id: usize, sequences: &[&[u32]]) -> Batch {
        let mut batch = Batch { id, input_ids: Vec::new(), position_ids: Vec::new(), cu_seqlens: vec![0] };
        for seq in sequences {
            batch.input_ids.extend_from_slice(seq);
            batch.position_ids.extend(0..seq.len() as u32);
            batch.cu_seqlens.push(batch.input_ids.len() as u32);
        }
        batch
    }
}

/// What the backend returns for a batch.
#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    /// (n_tokens, hidden) last hidden states (after the final norm), every batch row.
    pub hidden: Vec<f32>,
    /// (n_seqs, hidden) last-token and mean pooling, not normalized.
    pub pooled_last: Vec<f32>,
    pub pooled_mean: Vec<f32>,
    /// Compact rows the plan used, and whether the gate chose radix.
    pub n_compact: usize,
    pub use_radix: bool,
}

/// Causal varlen attention with grouped KV heads over full-space Q/K/V, in plain f32 loops:
/// each row attends to the rows of its own sequence up to itself; query head `h` reads KV
/// head `h / (n_heads / n_kv_heads)`.
pub fn causal_gqa(a: &mut AttentionArgs<'_>) {
    let (d, heads, kv_heads) = (a.head_dim, a.n_heads, a.n_kv_heads);
    let mut weights = Vec::new();
    for seq in a.cu_seqlens.windows(2) {
        let (start, end) = (seq[0] as usize, seq[1] as usize);
        for i in start..end {
            for h in 0..heads {
                let (q, kv) = (&a.q[(i * heads + h) * d..][..d], h / (heads / kv_heads));
                let kv_row = |j: usize| (j * kv_heads + kv) * d..(j * kv_heads + kv + 1) * d;
                weights.clear();
                weights.extend(
                    (start..=i).map(|j| q.iter().zip(&a.k[kv_row(j)]).map(|(x, y)| x * y).sum::<f32>() * a.scale),
                );
                let max = weights.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                weights.iter_mut().for_each(|w| *w = (*w - max).exp());
                let sum: f32 = weights.iter().sum();
                let out = &mut a.out[(i * heads + h) * d..][..d];
                out.fill(0.0);
                for (j, w) in (start..=i).zip(&weights) {
                    out.iter_mut().zip(&a.v[kv_row(j)]).for_each(|(o, v)| *o += w / sum * v);
                }
            }
        }
    }
}

/// One thread's backend: a context on the shared model and the activation buffers, grown to
/// the largest batch seen and reused.
pub struct Backend<'m> {
    ctx: Context<'m>,
    hidden: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attn: Vec<f32>,
}

impl<'m> Backend<'m> {
    pub fn new(model: &'m Model, max_tokens: usize) -> Result<Backend<'m>, Error> {
        let ctx = model.context(max_tokens)?;
        Ok(Backend { ctx, hidden: Vec::new(), q: Vec::new(), k: Vec::new(), v: Vec::new(), attn: Vec::new() })
    }

    /// One batch: embed, per layer pre-attention, the host's attention, post-attention; the
    /// final norm to batch rows; pooling.
    pub fn run(&mut self, plan: &Plan) -> Result<Output, Error> {
        let model = self.ctx.model();
        let cfg = model.config();
        let n = plan.n_tokens;
        self.hidden.resize(plan.n_compact_padded * cfg.hidden_size, 0.0);
        self.q.resize(n * cfg.q_dim(), 0.0);
        self.attn.resize(n * cfg.q_dim(), 0.0);
        self.k.resize(n * cfg.kv_dim(), 0.0);
        self.v.resize(n * cfg.kv_dim(), 0.0);
        self.ctx.embed(plan, &mut self.hidden)?;
        for layer in 0..cfg.num_hidden_layers {
            self.ctx.pre_attention(layer, plan, &self.hidden, &mut self.q, &mut self.k, &mut self.v)?;
            causal_gqa(&mut AttentionArgs {
                layer,
                n_heads: cfg.num_attention_heads,
                n_kv_heads: cfg.num_key_value_heads,
                head_dim: cfg.head_dim,
                scale: 1.0 / (cfg.head_dim as f32).sqrt(),
                cu_seqlens: &plan.cu_seqlens,
                q: &self.q,
                k: &self.k,
                v: &self.v,
                out: &mut self.attn,
            });
            self.ctx.post_attention(layer, plan, &self.attn, &mut self.hidden)?;
        }
        let mut hidden = vec![0.0; n * cfg.hidden_size];
        self.ctx.final_norm(plan, &self.hidden, &mut hidden)?;
        Ok(Output {
            pooled_last: model.pool(&hidden, &plan.cu_seqlens, Pooling::Last, false)?,
            pooled_mean: model.pool(&hidden, &plan.cu_seqlens, Pooling::Mean, false)?,
            hidden,
            n_compact: plan.n_compact,
            use_radix: plan.use_radix,
        })
    }
}

/// Each batch's id with its output or its error, in queue order.
pub type Served = Vec<(usize, Result<Output, Error>)>;

/// Serves `batches` in order on this thread's own planner and context: the queue thread plans
/// ahead while the backend runs.
pub fn serve(model: &Model, max_tokens: usize, params: PlanParams, batches: Vec<Batch>) -> Result<Served, Error> {
    let mut backend = Backend::new(model, max_tokens)?;
    let mut planner = Planner::new()?;
    // Capacity 1: the queue is at most one plan ahead of the one it is building.
    let (to_backend, plans) = mpsc::sync_channel::<(usize, Result<Plan, Error>)>(1);
    Ok(thread::scope(|s| {
        s.spawn(move || {
            for b in batches {
                let plan = planner.build(&b.input_ids, &b.position_ids, &b.cu_seqlens, &params).map(|p| p.to_owned());
                if to_backend.send((b.id, plan)).is_err() {
                    return; // the backend is gone
                }
            }
        });
        plans.iter().map(|(id, plan)| (id, plan.and_then(|plan| backend.run(&plan)))).collect()
    }))
}
