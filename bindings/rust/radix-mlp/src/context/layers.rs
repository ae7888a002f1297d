//! The per-layer calls of a [`Context`], for a host that keeps attention (TEI's flash-attention):
//! embed, the two halves of a layer around attention (full or compact space), the final norm, and
//! the library's built-in attention on a host's [`AttentionArgs`].
use radix_mlp_sys as sys;

use crate::attention::AttentionArgs;
use crate::context::{Context, ModelHolder};
use crate::error::{Error, Status};
use crate::model::{check_len, to_u32};
use crate::planner::AsPlan;

impl<M: ModelHolder> Context<'_, M> {
    /// Embeds the plan's compact ids (`rmlp_embed`): `hidden` (at least n_compact_padded x
    /// hidden_size). Checks every id against vocab_size and position against max_position_embeddings.
    pub fn embed<P: AsPlan + ?Sized>(&mut self, plan: &P, hidden: &mut [f32]) -> Result<(), Error> {
        const FN: &str = "radix_mlp::Context::embed";
        self.host_memory(FN)?;
        let raw = self.plan(FN, plan)?;
        check_len(FN, "hidden", hidden.len(), raw.n_compact_padded as usize, self.model.config.hidden_size)?;
        // SAFETY: `raw` points into `plan`, borrowed for the call; `hidden` is long enough.
        Error::check(unsafe { sys::rmlp_embed(self.raw.as_ptr(), &raw, hidden.as_mut_ptr().cast()) })
    }

    /// First half of `layer` (`rmlp_layer_pre_attention`): reads `hidden` (n_compact_padded x
    /// hidden_size), writes `q` (n_tokens x q_dim), `k` and `v` (n_tokens x kv_dim) in batch rows.
    pub fn pre_attention<P: AsPlan + ?Sized>(
        &mut self,
        layer: usize,
        plan: &P,
        hidden: &[f32],
        q: &mut [f32],
        k: &mut [f32],
        v: &mut [f32],
    ) -> Result<(), Error> {
        self.layer_pre_attention("radix_mlp::Context::pre_attention", layer, plan, hidden, [q, k, v], false)
    }

    /// First half of `layer` in compact space (`rmlp_layer_pre_attention_compact`), no scatter:
    /// reads `hidden` (n_compact_padded x hidden_size), writes `q` (n_compact_padded x q_dim), `k`
    /// and `v` (n_compact_padded x kv_dim) for every compact row: the input of
    /// [`attention_compact`](Self::attention_compact) or of the host's own compact attention.
    pub fn pre_attention_compact<P: AsPlan + ?Sized>(
        &mut self,
        layer: usize,
        plan: &P,
        hidden: &[f32],
        q: &mut [f32],
        k: &mut [f32],
        v: &mut [f32],
    ) -> Result<(), Error> {
        self.layer_pre_attention("radix_mlp::Context::pre_attention_compact", layer, plan, hidden, [q, k, v], true)
    }

    fn layer_pre_attention<P: AsPlan + ?Sized>(
        &mut self,
        fn_name: &str,
        layer: usize,
        plan: &P,
        hidden: &[f32],
        [q, k, v]: [&mut [f32]; 3],
        compact: bool,
    ) -> Result<(), Error> {
        self.host_memory(fn_name)?;
        let raw = self.plan(fn_name, plan)?;
        let c = &self.model.config;
        let rows = if compact { raw.n_compact_padded } else { raw.n_tokens } as usize;
        check_len(fn_name, "hidden", hidden.len(), raw.n_compact_padded as usize, c.hidden_size)?;
        check_len(fn_name, "q", q.len(), rows, c.q_dim())?;
        check_len(fn_name, "k", k.len(), rows, c.kv_dim())?;
        check_len(fn_name, "v", v.len(), rows, c.kv_dim())?;
        let layer = to_u32(fn_name, "layer", layer)?;
        let call = if compact { sys::rmlp_layer_pre_attention_compact } else { sys::rmlp_layer_pre_attention };
        // SAFETY: `raw` points into `plan`; every buffer is long enough and they are distinct.
        Error::check(unsafe {
            call(
                self.raw.as_ptr(),
                layer,
                &raw,
                hidden.as_ptr().cast(),
                q.as_mut_ptr().cast(),
                k.as_mut_ptr().cast(),
                v.as_mut_ptr().cast(),
            )
        })
    }

    /// Second half of `layer` (`rmlp_layer_post_attention`): gathers `attn` (n_tokens x q_dim)
    /// to compact rows, O projection, residual, norm, MLP, residual; `hidden` is updated in place.
    pub fn post_attention<P: AsPlan + ?Sized>(
        &mut self,
        layer: usize,
        plan: &P,
        attn: &[f32],
        hidden: &mut [f32],
    ) -> Result<(), Error> {
        self.layer_post_attention("radix_mlp::Context::post_attention", layer, plan, attn, hidden, false)
    }

    /// Second half of `layer` in compact space (`rmlp_layer_post_attention_compact`), no gather:
    /// `attn` (n_compact_padded x q_dim) is the compact attention output; `hidden` is updated in
    /// place.
    pub fn post_attention_compact<P: AsPlan + ?Sized>(
        &mut self,
        layer: usize,
        plan: &P,
        attn: &[f32],
        hidden: &mut [f32],
    ) -> Result<(), Error> {
        self.layer_post_attention("radix_mlp::Context::post_attention_compact", layer, plan, attn, hidden, true)
    }

    fn layer_post_attention<P: AsPlan + ?Sized>(
        &mut self,
        fn_name: &str,
        layer: usize,
        plan: &P,
        attn: &[f32],
        hidden: &mut [f32],
        compact: bool,
    ) -> Result<(), Error> {
        self.host_memory(fn_name)?;
        let raw = self.plan(fn_name, plan)?;
        let c = &self.model.config;
        let rows = if compact { raw.n_compact_padded } else { raw.n_tokens } as usize;
        check_len(fn_name, "attn", attn.len(), rows, c.q_dim())?;
        check_len(fn_name, "hidden", hidden.len(), raw.n_compact_padded as usize, c.hidden_size)?;
        let layer = to_u32(fn_name, "layer", layer)?;
        let call = if compact { sys::rmlp_layer_post_attention_compact } else { sys::rmlp_layer_post_attention };
        // SAFETY: `raw` points into `plan`; both buffers are long enough and distinct.
        Error::check(unsafe { call(self.raw.as_ptr(), layer, &raw, attn.as_ptr().cast(), hidden.as_mut_ptr().cast()) })
    }

    /// The final RMSNorm of `hidden` (n_compact_padded x hidden_size) scattered to the batch
    /// rows (`rmlp_final_norm`): `out` (n_tokens x hidden_size).
    pub fn final_norm<P: AsPlan + ?Sized>(&mut self, plan: &P, hidden: &[f32], out: &mut [f32]) -> Result<(), Error> {
        self.run_final_norm("radix_mlp::Context::final_norm", plan, hidden, out, false)
    }

    /// The final RMSNorm of `hidden` (n_compact_padded x hidden_size) in compact rows
    /// (`rmlp_final_norm_compact`, no scatter): `out` (n_compact_padded x hidden_size), as
    /// [`forward_compact`](Self::forward_compact) gives it.
    pub fn final_norm_compact<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        hidden: &[f32],
        out: &mut [f32],
    ) -> Result<(), Error> {
        self.run_final_norm("radix_mlp::Context::final_norm_compact", plan, hidden, out, true)
    }

    fn run_final_norm<P: AsPlan + ?Sized>(
        &mut self,
        fn_name: &str,
        plan: &P,
        hidden: &[f32],
        out: &mut [f32],
        compact: bool,
    ) -> Result<(), Error> {
        self.host_memory(fn_name)?;
        let raw = self.plan(fn_name, plan)?;
        let h = self.model.config.hidden_size;
        check_len(fn_name, "hidden", hidden.len(), raw.n_compact_padded as usize, h)?;
        let rows = if compact { raw.n_compact_padded } else { raw.n_tokens } as usize;
        check_len(fn_name, "out", out.len(), rows, h)?;
        let call = if compact { sys::rmlp_final_norm_compact } else { sys::rmlp_final_norm };
        // SAFETY: `raw` points into `plan`; both buffers are long enough and distinct.
        Error::check(unsafe { call(self.raw.as_ptr(), &raw, hidden.as_ptr().cast(), out.as_mut_ptr().cast()) })
    }

    /// The built-in causal varlen attention with grouped KV heads (`rmlp_attention`), for a host
    /// that calls the per-layer entry points but has no attention of its own. Full layout
    /// (`args.compact` is `None`).
    pub fn attention(&mut self, args: &mut AttentionArgs<'_>) -> Result<(), Error> {
        self.run_attention("radix_mlp::Context::attention", args, false)
    }

    /// The built-in attention in compact space (`rmlp_attention_compact`): `args.compact` holds
    /// the layout (the plan's `qo_indptr` and `scatter`), `q`, `k`, `v` and `out` the compact
    /// rows (as [`pre_attention_compact`](Self::pre_attention_compact) writes them and
    /// [`post_attention_compact`](Self::post_attention_compact) reads them).
    pub fn attention_compact(&mut self, args: &mut AttentionArgs<'_>) -> Result<(), Error> {
        self.run_attention("radix_mlp::Context::attention_compact", args, true)
    }

    fn run_attention(&mut self, fn_name: &str, args: &mut AttentionArgs<'_>, compact: bool) -> Result<(), Error> {
        self.host_memory(fn_name)?;
        let layout = match (&args.compact, compact) {
            (None, false) => None,
            (Some(layout), true) => Some(layout),
            (given, _) => {
                let (is, takes) = if given.is_some() { ("Some", "attention_compact") } else { ("None", "attention") };
                return Err(Error::new(
                    Status::InvalidArgument,
                    format!(
                        "{fn_name}: args.compact is {is}: the layout of this call is radix_mlp::Context::{takes}'s"
                    ),
                ));
            }
        };
        let (n, n_seqs, rows) = (args.n_tokens(), args.n_seqs(), args.n_rows());
        let (qd, kvd) = (args.n_heads.saturating_mul(args.head_dim), args.n_kv_heads.saturating_mul(args.head_dim));
        check_len(fn_name, "q", args.q.len(), rows, qd)?;
        check_len(fn_name, "k", args.k.len(), rows, kvd)?;
        check_len(fn_name, "v", args.v.len(), rows, kvd)?;
        check_len(fn_name, "out", args.out.len(), rows, qd)?;
        let null = core::ptr::null::<u32>();
        let (qo_indptr, kv_indptr, kv_indices) = match layout {
            None => (null, null, null),
            Some(layout) => {
                for (name, len, want) in
                    [("qo_indptr", layout.qo_indptr.len(), n_seqs + 1), ("kv_indices", layout.kv_indices.len(), n)]
                {
                    if len != want {
                        return Err(Error::new(
                            Status::InvalidArgument,
                            format!("{fn_name}: args.compact.{name} has {len} entries, needs {want}"),
                        ));
                    }
                }
                (layout.qo_indptr.as_ptr(), args.cu_seqlens.as_ptr(), layout.kv_indices.as_ptr())
            }
        };
        let raw = sys::rmlp_attention_args {
            layer: to_u32(fn_name, "layer", args.layer)?,
            n_tokens: to_u32(fn_name, "n_tokens", n)?,
            n_seqs: to_u32(fn_name, "n_seqs", n_seqs)?,
            n_heads: to_u32(fn_name, "n_heads", args.n_heads)?,
            n_kv_heads: to_u32(fn_name, "n_kv_heads", args.n_kv_heads)?,
            head_dim: to_u32(fn_name, "head_dim", args.head_dim)?,
            scale: args.scale,
            dtype: sys::RMLP_DTYPE_F32,
            cu_seqlens: args.cu_seqlens.as_ptr(),
            q: args.q.as_ptr().cast(),
            k: args.k.as_ptr().cast(),
            v: args.v.as_ptr().cast(),
            out: args.out.as_mut_ptr().cast(),
            stream: core::ptr::null_mut(),
            cu_seqlens_device: args.cu_seqlens.as_ptr(),
            max_seqlen: 0,
            layout: if compact { sys::RMLP_ATTENTION_COMPACT } else { sys::RMLP_ATTENTION_FULL },
            n_compact: if compact { to_u32(fn_name, "n_compact", rows)? } else { 0 },
            qo_indptr,
            kv_indptr,
            kv_indices,
            qo_indptr_device: qo_indptr,
            kv_indptr_device: kv_indptr,
            kv_indices_device: kv_indices,
        };
        // SAFETY: the buffers hold `rows` rows of their widths (n_tokens = cu_seqlens[n_seqs] in
        // full space, n_compact = qo_indptr[n_seqs] in compact space; the library checks that
        // both are non-decreasing and every kv_indices entry is below n_compact, so nothing
        // reaches further); qo_indptr has n_seqs + 1 entries and kv_indices n_tokens.
        Error::check(unsafe {
            if compact {
                sys::rmlp_attention_compact(self.raw.as_ptr(), &raw)
            } else {
                sys::rmlp_attention(self.raw.as_ptr(), &raw)
            }
        })
    }
}
