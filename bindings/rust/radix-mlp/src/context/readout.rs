//! The read-outs of a [`Context`]'s last hidden states, into host f32: pooling per sequence and
//! reranker pair scores, of batch rows or of compact rows read through the plan's `scatter`.
//! `hidden` is a [`Buffer`]: host f32 for a CPU model, a device slice in the model's dtype for a
//! CUDA one (the call then synchronises the context's stream).
use radix_mlp_sys as sys;

use crate::buffer::Buffer;
use crate::context::{Context, ModelHolder};
use crate::error::Error;
use crate::model::pair_scores;
use crate::planner::AsPlan;
use crate::types::{PairScore, Pooling};
#[cfg(doc)] // the documentation links to it
use crate::Model;

impl<M: ModelHolder> Context<'_, M> {
    /// Pools `hidden` (at least n_tokens x hidden_size, `n_tokens = cu_seqlens[last]`: the
    /// output of [`forward`](Self::forward) or [`final_norm`](Self::final_norm)) per sequence
    /// (`rmlp_context_pool`): n_seqs x hidden_size; `normalize` scales each vector to unit L2
    /// norm. On the CPU the same as [`Model::pool`].
    pub fn pool<'b>(
        &mut self,
        hidden: impl Into<Buffer<'b>>,
        cu_seqlens: &[u32],
        pooling: Pooling,
        normalize: bool,
    ) -> Result<Vec<f32>, Error> {
        const FN: &str = "radix_mlp::Context::pool";
        let h = self.model.config.hidden_size;
        let (n_tokens, n_seqs) = (cu_seqlens.last().map_or(0, |&n| n as usize), cu_seqlens.len().saturating_sub(1));
        let hidden = hidden.into().checked(FN, "hidden", &self.model, n_tokens, h)?;
        let mut out = vec![0.0f32; n_seqs * h];
        // SAFETY: `hidden` is the model's memory holding n_tokens rows; `out` has n_seqs rows of
        // hidden_size floats; `cu_seqlens` has n_seqs + 1 entries (read only when n_seqs >= 1).
        Error::check(unsafe {
            sys::rmlp_context_pool(
                self.raw_ptr(),
                hidden,
                n_tokens,
                cu_seqlens.as_ptr(),
                n_seqs,
                pooling.raw(),
                normalize,
                out.as_mut_ptr(),
            )
        })?;
        Ok(out)
    }

    /// Reranker scores (`rmlp_score_pair`, Qwen3-Reranker's yes/no): the LM-head logits of
    /// `token_a` and `token_b` at each sequence's last row of `hidden` (at least n_tokens x
    /// hidden_size, the output of [`forward`](Self::forward) or [`final_norm`](Self::final_norm)).
    pub fn score_pair<'b>(
        &mut self,
        hidden: impl Into<Buffer<'b>>,
        cu_seqlens: &[u32],
        token_a: u32,
        token_b: u32,
    ) -> Result<Vec<PairScore>, Error> {
        const FN: &str = "radix_mlp::Context::score_pair";
        let (n_tokens, n_seqs) = (cu_seqlens.last().map_or(0, |&n| n as usize), cu_seqlens.len().saturating_sub(1));
        let hidden = hidden.into().checked(FN, "hidden", &self.model, n_tokens, self.model.config.hidden_size)?;
        let (mut logits, mut prob_a) = (vec![0.0f32; 2 * n_seqs], vec![0.0f32; n_seqs]);
        // SAFETY: `hidden` is the model's memory holding n_tokens rows; the output vectors have
        // 2 * n_seqs and n_seqs floats.
        Error::check(unsafe {
            sys::rmlp_score_pair(
                self.raw_ptr(),
                hidden,
                n_tokens,
                cu_seqlens.as_ptr(),
                n_seqs,
                token_a,
                token_b,
                logits.as_mut_ptr(),
                prob_a.as_mut_ptr(),
            )
        })?;
        Ok(pair_scores(&logits, &prob_a))
    }

    /// Pools compact rows per sequence (`rmlp_context_pool_compact`): `hidden` (at least
    /// n_compact_padded x hidden_size, the output of [`forward_compact`](Self::forward_compact) or
    /// [`final_norm_compact`](Self::final_norm_compact)) is read per batch row through the plan's
    /// `scatter`, so the result equals [`pool`](Self::pool) of the full output: n_seqs x hidden_size.
    pub fn pool_compact<'b, P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        hidden: impl Into<Buffer<'b>>,
        pooling: Pooling,
        normalize: bool,
    ) -> Result<Vec<f32>, Error> {
        const FN: &str = "radix_mlp::Context::pool_compact";
        let raw = plan.as_raw()?;
        let h = self.model.config.hidden_size;
        let hidden = hidden.into().checked(FN, "hidden", &self.model, raw.n_compact_padded as usize, h)?;
        let mut out = vec![0.0f32; raw.n_seqs as usize * h];
        // SAFETY: `raw` points into `plan`; `hidden` is the model's memory holding the plan's
        // n_compact_padded rows; `out` has n_seqs rows of hidden_size floats.
        Error::check(unsafe {
            sys::rmlp_context_pool_compact(self.raw_ptr(), &raw, hidden, pooling.raw(), normalize, out.as_mut_ptr())
        })?;
        Ok(out)
    }

    /// Reranker scores at each sequence's last row of compact rows (`rmlp_score_pair_compact`):
    /// [`score_pair`](Self::score_pair) of `hidden` (at least n_compact_padded x hidden_size) read
    /// through the plan's `scatter`.
    pub fn score_pair_compact<'b, P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        hidden: impl Into<Buffer<'b>>,
        token_a: u32,
        token_b: u32,
    ) -> Result<Vec<PairScore>, Error> {
        const FN: &str = "radix_mlp::Context::score_pair_compact";
        let raw = plan.as_raw()?;
        let rows = raw.n_compact_padded as usize;
        let hidden = hidden.into().checked(FN, "hidden", &self.model, rows, self.model.config.hidden_size)?;
        let n_seqs = raw.n_seqs as usize;
        let (mut logits, mut prob_a) = (vec![0.0f32; 2 * n_seqs], vec![0.0f32; n_seqs]);
        // SAFETY: `raw` points into `plan`; `hidden` is the model's memory holding the plan's
        // compact rows; the output vectors have 2 * n_seqs and n_seqs floats.
        Error::check(unsafe {
            sys::rmlp_score_pair_compact(
                self.raw_ptr(),
                &raw,
                hidden,
                token_a,
                token_b,
                logits.as_mut_ptr(),
                prob_a.as_mut_ptr(),
            )
        })?;
        Ok(pair_scores(&logits, &prob_a))
    }
}
