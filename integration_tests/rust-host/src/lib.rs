//! A host that drives libradix_mlp the way text-embeddings-inference's candle backend would,
//! through the safe `radix-mlp` crate, std only:
//!
//! - [`serve`]: a queue thread with its own [`Planner`] builds the plan of batch k+1 (an owned
//!   [`Plan`] sent over a channel) while the backend runs batch k; a batch that fails (bad
//!   `cu_seqlens`, a token id past the vocabulary, too many tokens) gets its error and the next
//!   batch is served;
//! - [`Backend::run`]: the library's per-layer entry points (embed, pre-attention,
//!   post-attention, final norm) around the host's own attention, [`causal_gqa`], then pooling;
//!   in full space (Q/K/V of the batch rows) or in compact space (the `*_compact` entry points:
//!   the compact rows only, each sequence's keys its path through `scatter`).
//!
//! Any number of threads may each `serve` on one shared [`Model`].
use std::sync::mpsc;
use std::thread;

use radix_mlp::{
    AttentionArgs, AttentionSpace, CompactLayout, Context, Error, Model, Plan, PlanParams, Planner, Pooling,
};

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
    /// Whether attention ran in compact space.
    pub compact_space: bool,
}

/// Causal varlen attention with grouped KV heads, in plain f32 loops, in either layout: query
/// head `h` reads KV head `h / (n_heads / n_kv_heads)`, and each query attends to its
/// sequence's rows up to its own position, the last `sliding_window` of them where the layer has
/// a window (index `p` sees `p + 1 - sliding_window ..= p`), its scaled scores soft-capped
/// (`softcap * tanh(s / softcap)`) where the layer caps them. Full space: the queries and keys of
/// sequence `s` are its batch rows. Compact space: its queries are the compact rows it owns
/// (`qo_indptr`), the last of its path, and its keys the path's rows (`kv_indices`), so owned
/// query `t` of `q_s` sits at position `L_s - q_s + t`.
pub fn causal_gqa(a: &mut AttentionArgs<'_>) {
    let (d, heads, kv_heads) = (a.head_dim, a.n_heads, a.n_kv_heads);
    let (mut weights, mut path) = (Vec::new(), Vec::new());
    for s in 0..a.n_seqs() {
        let (start, end) = (a.cu_seqlens[s] as usize, a.cu_seqlens[s + 1] as usize);
        path.clear();
        let queries = match a.compact {
            None => {
                path.extend(start..end);
                start..end
            }
            Some(CompactLayout { qo_indptr, kv_indices }) => {
                path.extend(kv_indices[start..end].iter().map(|&r| r as usize));
                qo_indptr[s] as usize..qo_indptr[s + 1] as usize
            }
        };
        let first_position = path.len() - queries.len();
        for (t, i) in queries.enumerate() {
            let p = first_position + t;
            let from = if a.sliding_window > 0 { (p + 1).saturating_sub(a.sliding_window) } else { 0 };
            let keys = &path[from..=p];
            for h in 0..heads {
                let (q, kv) = (&a.q[(i * heads + h) * d..][..d], h / (heads / kv_heads));
                let kv_row = |j: usize| (j * kv_heads + kv) * d..(j * kv_heads + kv + 1) * d;
                weights.clear();
                let cap = |s: f32| if a.softcap > 0.0 { a.softcap * (s / a.softcap).tanh() } else { s };
                weights.extend(
                    keys.iter().map(|&j| cap(q.iter().zip(&a.k[kv_row(j)]).map(|(x, y)| x * y).sum::<f32>() * a.scale)),
                );
                let max = weights.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                weights.iter_mut().for_each(|w| *w = (*w - max).exp());
                let sum: f32 = weights.iter().sum();
                let out = &mut a.out[(i * heads + h) * d..][..d];
                out.fill(0.0);
                for (&j, w) in keys.iter().zip(&weights) {
                    out.iter_mut().zip(&a.v[kv_row(j)]).for_each(|(o, v)| *o += w / sum * v);
                }
            }
        }
    }
}

/// One thread's backend: a context on the shared model, where its attention runs, and the
/// activation buffers, grown to the largest batch seen and reused.
pub struct Backend<'m> {
    ctx: Context<'m>,
    space: AttentionSpace,
    hidden: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attn: Vec<f32>,
}

impl<'m> Backend<'m> {
    /// `space`: where the host's attention runs; `Auto` is compact space when the plan shares
    /// rows, as the library decides it.
    pub fn new(model: &'m Model, max_tokens: usize, space: AttentionSpace) -> Result<Backend<'m>, Error> {
        let ctx = model.context(max_tokens)?;
        Ok(Backend { ctx, space, hidden: Vec::new(), q: Vec::new(), k: Vec::new(), v: Vec::new(), attn: Vec::new() })
    }

    /// One batch: embed, per layer pre-attention, the host's attention, post-attention; the
    /// final norm; pooling. In compact space nothing leaves the compact rows until the end,
    /// where the batch rows are read through `scatter`.
    pub fn run(&mut self, plan: &Plan) -> Result<Output, Error> {
        let model = self.ctx.model();
        let cfg = model.config();
        let compact = match self.space {
            AttentionSpace::Full => false,
            AttentionSpace::Compact => true,
            AttentionSpace::Auto => plan.use_radix,
        };
        let (h, rows) = (cfg.hidden_size, if compact { plan.n_compact_padded } else { plan.n_tokens });
        self.hidden.resize(plan.n_compact_padded * h, 0.0);
        self.q.resize(rows * cfg.q_dim(), 0.0);
        self.attn.resize(rows * cfg.q_dim(), 0.0);
        self.k.resize(rows * cfg.kv_dim(), 0.0);
        self.v.resize(rows * cfg.kv_dim(), 0.0);
        self.ctx.embed(plan, &mut self.hidden)?;
        for layer in 0..cfg.num_hidden_layers {
            let (q, k, v) = (&mut self.q, &mut self.k, &mut self.v);
            if compact {
                self.ctx.pre_attention_compact(layer, plan, &self.hidden, q, k, v)?;
            } else {
                self.ctx.pre_attention(layer, plan, &self.hidden, q, k, v)?;
            }
            let la = model.layer_attention(layer)?;
            causal_gqa(&mut AttentionArgs {
                layer,
                n_heads: cfg.num_attention_heads,
                n_kv_heads: cfg.num_key_value_heads,
                head_dim: cfg.head_dim,
                scale: la.scale,
                sliding_window: la.sliding_window,
                softcap: la.softcap,
                cu_seqlens: &plan.cu_seqlens,
                q: &self.q,
                k: &self.k,
                v: &self.v,
                out: &mut self.attn,
                compact: compact.then(|| CompactLayout { qo_indptr: &plan.qo_indptr, kv_indices: &plan.scatter }),
            });
            if compact {
                self.ctx.post_attention_compact(layer, plan, &self.attn, &mut self.hidden)?;
            } else {
                self.ctx.post_attention(layer, plan, &self.attn, &mut self.hidden)?;
            }
        }
        let mut out = vec![0.0; rows * h];
        let (hidden, pooled_last, pooled_mean) = if compact {
            self.ctx.final_norm_compact(plan, &self.hidden, &mut out)?;
            (
                plan.scatter.iter().flat_map(|&r| &out[r as usize * h..][..h]).copied().collect(),
                self.ctx.pool_compact(plan, &out, Pooling::Last, false)?,
                self.ctx.pool_compact(plan, &out, Pooling::Mean, false)?,
            )
        } else {
            self.ctx.final_norm(plan, &self.hidden, &mut out)?;
            let last = model.pool(&out, &plan.cu_seqlens, Pooling::Last, false)?;
            let mean = model.pool(&out, &plan.cu_seqlens, Pooling::Mean, false)?;
            (out, last, mean)
        };
        let (n_compact, use_radix) = (plan.n_compact, plan.use_radix);
        Ok(Output { hidden, pooled_last, pooled_mean, n_compact, use_radix, compact_space: compact })
    }
}

/// Each batch's id with its output or its error, in queue order.
pub type Served = Vec<(usize, Result<Output, Error>)>;

/// Serves `batches` in order on this thread's own planner and context, the host's attention in
/// `space`: the queue thread plans ahead while the backend runs.
pub fn serve(
    model: &Model,
    max_tokens: usize,
    params: PlanParams,
    space: AttentionSpace,
    batches: Vec<Batch>,
) -> Result<Served, Error> {
    let mut backend = Backend::new(model, max_tokens, space)?;
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
