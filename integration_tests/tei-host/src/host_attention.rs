//! `--attention host`: a batch through the library's layer pieces with the host's own attention
//! between them, as TEI keeps its flash-attention: `embed` (the compact rows), per layer
//! `pre_attention` (Q/K/V scattered to the batch rows), the host's causal attention over those
//! full rows (`rust_host::causal_gqa`, plain f32 loops, with each layer's scale, sliding window and
//! soft-cap from `Model::layer_attention`), `post_attention` (its output gathered
//! back to the compact rows), then the final norm of the compact rows, which the read-outs take
//! through the plan's `scatter`. With radix off the plan is the identity and every step runs on
//! the batch rows. The activation buffers grow to the largest batch and are reused.
use radix_mlp::{AttentionArgs, Error, PlanView, SharedContext};

#[derive(Default)]
pub struct HostLayers {
    hidden: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attn: Vec<f32>,
}

impl HostLayers {
    /// Runs `plan` through `ctx`'s model; `out` (resized to n_compact_padded x hidden) receives
    /// the final-normed compact rows, for `pool_compact` / `score_pair_compact`.
    pub fn run(&mut self, ctx: &mut SharedContext, plan: &PlanView<'_>, out: &mut Vec<f32>) -> Result<(), Error> {
        let c = ctx.model().config().clone();
        let (n, rows, h) = (plan.n_tokens(), plan.n_compact_padded(), c.hidden_size);
        self.hidden.resize(rows * h, 0.0);
        self.q.resize(n * c.q_dim(), 0.0);
        self.attn.resize(n * c.q_dim(), 0.0);
        self.k.resize(n * c.kv_dim(), 0.0);
        self.v.resize(n * c.kv_dim(), 0.0);
        ctx.embed(plan, &mut self.hidden)?;
        for layer in 0..c.num_hidden_layers {
            ctx.pre_attention(layer, plan, &self.hidden, &mut self.q, &mut self.k, &mut self.v)?;
            let la = ctx.model().layer_attention(layer)?;
            rust_host::causal_gqa(&mut AttentionArgs {
                layer,
                n_heads: c.num_attention_heads,
                n_kv_heads: c.num_key_value_heads,
                head_dim: c.head_dim,
                scale: la.scale,
                sliding_window: la.sliding_window,
                softcap: la.softcap,
                cu_seqlens: plan.cu_seqlens(),
                q: &self.q,
                k: &self.k,
                v: &self.v,
                out: &mut self.attn,
                compact: None,
            });
            ctx.post_attention(layer, plan, &self.attn, &mut self.hidden)?;
        }
        out.resize(rows * h, 0.0);
        ctx.final_norm_compact(plan, &self.hidden, out)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use radix_mlp::{Context, Gate, Model, PlanParams, Planner, Pooling};

    use super::HostLayers;

    /// The layer pieces with the host's attention equal the library's whole forward (radix on and
    /// off), where the attention sums in another order: fp32 rounding apart. Also on models with
    /// sliding windows shorter than the first sequence (12 rows) and soft-capped scores (Gemma 2).
    #[test]
    fn host_layers_match_the_forward() {
        for name in ["qwen3_tiny", "qwen2_window", "mistral_window", "gemma2_window", "gemma3_text"] {
            host_layers_match(name);
        }
    }

    fn host_layers_match(name: &str) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures").join(name);
        let model = Arc::new(Model::load(dir).unwrap());
        let h = model.config().hidden_size;
        let seqs: [&[u32]; 3] = [&[5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7], &[5, 6, 7, 1], &[2, 3]];
        let ids: Vec<u32> = seqs.concat();
        let pos: Vec<u32> = seqs.iter().flat_map(|s| 0..s.len() as u32).collect();
        let cu: Vec<u32> = [0, 12, 16, 18].to_vec();
        let mut ctx = Context::new(Arc::clone(&model), 64).unwrap();
        let mut layers = HostLayers::default();
        for threshold in [1.0, 0.0] {
            let params = PlanParams { threshold, pad_multiple_of: Some(4), gate: Gate::Distinct };
            let mut planner = Planner::new().unwrap();
            let plan = planner.build(&ids, &pos, &cu, &params).unwrap();
            assert_eq!(plan.use_radix(), threshold > 0.5);
            let mut want = vec![0.0; ids.len() * h];
            ctx.forward(&plan, &mut want).unwrap();
            let want = model.pool(&want, &cu, Pooling::Mean, false).unwrap();
            let mut out = Vec::new();
            layers.run(&mut ctx, &plan, &mut out).unwrap();
            let got = ctx.pool_compact(&plan, &out, Pooling::Mean, false).unwrap();
            let diff = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            assert!(diff <= 1e-5, "{name} threshold {threshold}: host layers differ from forward by {diff}");
        }
    }
}
