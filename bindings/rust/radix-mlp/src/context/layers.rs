//! The per-layer calls of a [`Context`], for a host that keeps attention (TEI's flash-attention):
//! embed, the two halves of a layer around attention (full or compact space), the final norm, and
//! the library's built-in attention on a host's [`AttentionArgs`] or [`DeviceAttentionArgs`]. Every
//! buffer is a [`Buffer`] / [`BufferMut`]: host f32 slices for a CPU model, device slices in the
//! model's dtype for a CUDA one (after [`Context::set_plan`]), checked alike.
use radix_mlp_sys as sys;

use crate::attention::{AttentionArgs, Counts};
use crate::buffer::{Buffer, BufferMut};
use crate::context::{Context, ModelHolder};
use crate::device_attention::DeviceAttentionArgs;
use crate::error::{Error, Status};
use crate::model::to_u32;
use crate::planner::AsPlan;

impl<M: ModelHolder> Context<'_, M> {
    /// Embeds the plan's compact ids (`rmlp_embed`): `hidden` (at least n_compact_padded x
    /// hidden_size). Checks every id against vocab_size and position against max_position_embeddings.
    pub fn embed<'b, P: AsPlan + ?Sized>(&mut self, plan: &P, hidden: impl Into<BufferMut<'b>>) -> Result<(), Error> {
        const FN: &str = "radix_mlp::Context::embed";
        let raw = self.plan(FN, plan)?;
        let rows = raw.n_compact_padded as usize;
        let hidden = hidden.into().checked(FN, "hidden", &self.model, rows, self.model.config.hidden_size)?;
        // SAFETY: `raw` points into `plan`, borrowed for the call; `hidden` is the model's memory
        // and long enough.
        Error::check(unsafe { sys::rmlp_embed(self.raw.as_ptr(), &raw, hidden) })
    }

    /// First half of `layer` (`rmlp_layer_pre_attention`): reads `hidden` (n_compact_padded x
    /// hidden_size), writes `q` (n_tokens x q_dim), `k` and `v` (n_tokens x kv_dim) in batch rows.
    pub fn pre_attention<'b, P: AsPlan + ?Sized>(
        &mut self,
        layer: usize,
        plan: &P,
        hidden: impl Into<Buffer<'b>>,
        q: impl Into<BufferMut<'b>>,
        k: impl Into<BufferMut<'b>>,
        v: impl Into<BufferMut<'b>>,
    ) -> Result<(), Error> {
        let qkv = [q.into(), k.into(), v.into()];
        self.layer_pre_attention("radix_mlp::Context::pre_attention", layer, plan, hidden.into(), qkv, false)
    }

    /// First half of `layer` in compact space (`rmlp_layer_pre_attention_compact`), no scatter:
    /// reads `hidden` (n_compact_padded x hidden_size), writes `q` (n_compact_padded x q_dim), `k`
    /// and `v` (n_compact_padded x kv_dim) for every compact row: the input of
    /// [`attention_compact`](Self::attention_compact) or of the host's own compact attention.
    pub fn pre_attention_compact<'b, P: AsPlan + ?Sized>(
        &mut self,
        layer: usize,
        plan: &P,
        hidden: impl Into<Buffer<'b>>,
        q: impl Into<BufferMut<'b>>,
        k: impl Into<BufferMut<'b>>,
        v: impl Into<BufferMut<'b>>,
    ) -> Result<(), Error> {
        let qkv = [q.into(), k.into(), v.into()];
        self.layer_pre_attention("radix_mlp::Context::pre_attention_compact", layer, plan, hidden.into(), qkv, true)
    }

    fn layer_pre_attention<P: AsPlan + ?Sized>(
        &mut self,
        fn_name: &str,
        layer: usize,
        plan: &P,
        hidden: Buffer<'_>,
        [mut q, mut k, mut v]: [BufferMut<'_>; 3],
        compact: bool,
    ) -> Result<(), Error> {
        let raw = self.plan(fn_name, plan)?;
        let (m, c) = (&*self.model, &self.model.config);
        let rows = if compact { raw.n_compact_padded } else { raw.n_tokens } as usize;
        let hidden = hidden.checked(fn_name, "hidden", m, raw.n_compact_padded as usize, c.hidden_size)?;
        let q = q.checked(fn_name, "q", m, rows, c.q_dim())?;
        let k = k.checked(fn_name, "k", m, rows, c.kv_dim())?;
        let v = v.checked(fn_name, "v", m, rows, c.kv_dim())?;
        let layer = to_u32(fn_name, "layer", layer)?;
        let call = if compact { sys::rmlp_layer_pre_attention_compact } else { sys::rmlp_layer_pre_attention };
        // SAFETY: `raw` points into `plan`; every buffer is the model's memory, long enough, and
        // they are distinct (three `&mut` borrows and a shared one).
        Error::check(unsafe { call(self.raw.as_ptr(), layer, &raw, hidden, q, k, v) })
    }

    /// Second half of `layer` (`rmlp_layer_post_attention`): gathers `attn` (n_tokens x q_dim)
    /// to compact rows, O projection, residual, norm, MLP, residual; `hidden` is updated in place.
    pub fn post_attention<'b, P: AsPlan + ?Sized>(
        &mut self,
        layer: usize,
        plan: &P,
        attn: impl Into<Buffer<'b>>,
        hidden: impl Into<BufferMut<'b>>,
    ) -> Result<(), Error> {
        let fn_name = "radix_mlp::Context::post_attention";
        self.layer_post_attention(fn_name, layer, plan, attn.into(), hidden.into(), false)
    }

    /// Second half of `layer` in compact space (`rmlp_layer_post_attention_compact`), no gather:
    /// `attn` (n_compact_padded x q_dim) is the compact attention output; `hidden` is updated in
    /// place.
    pub fn post_attention_compact<'b, P: AsPlan + ?Sized>(
        &mut self,
        layer: usize,
        plan: &P,
        attn: impl Into<Buffer<'b>>,
        hidden: impl Into<BufferMut<'b>>,
    ) -> Result<(), Error> {
        let fn_name = "radix_mlp::Context::post_attention_compact";
        self.layer_post_attention(fn_name, layer, plan, attn.into(), hidden.into(), true)
    }

    fn layer_post_attention<P: AsPlan + ?Sized>(
        &mut self,
        fn_name: &str,
        layer: usize,
        plan: &P,
        attn: Buffer<'_>,
        mut hidden: BufferMut<'_>,
        compact: bool,
    ) -> Result<(), Error> {
        let raw = self.plan(fn_name, plan)?;
        let (m, c) = (&*self.model, &self.model.config);
        let rows = if compact { raw.n_compact_padded } else { raw.n_tokens } as usize;
        let attn = attn.checked(fn_name, "attn", m, rows, c.q_dim())?;
        let hidden = hidden.checked(fn_name, "hidden", m, raw.n_compact_padded as usize, c.hidden_size)?;
        let layer = to_u32(fn_name, "layer", layer)?;
        let call = if compact { sys::rmlp_layer_post_attention_compact } else { sys::rmlp_layer_post_attention };
        // SAFETY: `raw` points into `plan`; both buffers are the model's memory, long enough and distinct.
        Error::check(unsafe { call(self.raw.as_ptr(), layer, &raw, attn, hidden) })
    }

    /// The final RMSNorm of `hidden` (n_compact_padded x hidden_size) scattered to the batch
    /// rows (`rmlp_final_norm`): `out` (n_tokens x hidden_size).
    pub fn final_norm<'b, P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        hidden: impl Into<Buffer<'b>>,
        out: impl Into<BufferMut<'b>>,
    ) -> Result<(), Error> {
        self.run_final_norm("radix_mlp::Context::final_norm", plan, hidden.into(), out.into(), false)
    }

    /// The final RMSNorm of `hidden` (n_compact_padded x hidden_size) in compact rows
    /// (`rmlp_final_norm_compact`, no scatter): `out` (n_compact_padded x hidden_size), as
    /// [`forward_compact`](Self::forward_compact) gives it.
    pub fn final_norm_compact<'b, P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        hidden: impl Into<Buffer<'b>>,
        out: impl Into<BufferMut<'b>>,
    ) -> Result<(), Error> {
        self.run_final_norm("radix_mlp::Context::final_norm_compact", plan, hidden.into(), out.into(), true)
    }

    fn run_final_norm<P: AsPlan + ?Sized>(
        &mut self,
        fn_name: &str,
        plan: &P,
        hidden: Buffer<'_>,
        mut out: BufferMut<'_>,
        compact: bool,
    ) -> Result<(), Error> {
        let raw = self.plan(fn_name, plan)?;
        let (m, h) = (&*self.model, self.model.config.hidden_size);
        let hidden = hidden.checked(fn_name, "hidden", m, raw.n_compact_padded as usize, h)?;
        let rows = if compact { raw.n_compact_padded } else { raw.n_tokens } as usize;
        let out = out.checked(fn_name, "out", m, rows, h)?;
        let call = if compact { sys::rmlp_final_norm_compact } else { sys::rmlp_final_norm };
        // SAFETY: `raw` points into `plan`; both buffers are the model's memory, long enough and distinct.
        Error::check(unsafe { call(self.raw.as_ptr(), &raw, hidden, out) })
    }

    /// The built-in causal varlen attention with grouped KV heads (`rmlp_attention`), for a host
    /// that calls the per-layer entry points but has no attention of its own. Full layout
    /// (`args.compact` is `None`). `args.sliding_window` and `args.softcap` must be the layer's
    /// ([`Model::layer_attention`](crate::Model::layer_attention)): other values are refused.
    pub fn attention(&mut self, args: &mut AttentionArgs<'_>) -> Result<(), Error> {
        self.run_attention("radix_mlp::Context::attention", Call::host(args), false)
    }

    /// The built-in attention in compact space (`rmlp_attention_compact`): `args.compact` holds
    /// the layout (the plan's `qo_indptr` and `scatter`), `q`, `k`, `v` and `out` the compact
    /// rows (as [`pre_attention_compact`](Self::pre_attention_compact) writes them and
    /// [`post_attention_compact`](Self::post_attention_compact) reads them).
    pub fn attention_compact(&mut self, args: &mut AttentionArgs<'_>) -> Result<(), Error> {
        self.run_attention("radix_mlp::Context::attention_compact", Call::host(args), true)
    }

    /// [`attention`](Self::attention) on a CUDA model's device buffers (`rmlp_attention`),
    /// enqueued on the context's stream; `None` device arrays are the set plan's copies.
    pub fn device_attention(&mut self, args: &mut DeviceAttentionArgs<'_>) -> Result<(), Error> {
        self.run_attention("radix_mlp::Context::device_attention", Call::device(args), false)
    }

    /// [`attention_compact`](Self::attention_compact) on a CUDA model's device buffers
    /// (`rmlp_attention_compact`).
    pub fn device_attention_compact(&mut self, args: &mut DeviceAttentionArgs<'_>) -> Result<(), Error> {
        self.run_attention("radix_mlp::Context::device_attention_compact", Call::device(args), true)
    }

    fn run_attention(&mut self, fn_name: &str, mut a: Call<'_>, compact: bool) -> Result<(), Error> {
        let layout = match (&a.compact, compact) {
            (None, false) => None,
            (Some(layout), true) => Some(*layout),
            (given, _) => {
                let is = if given.is_some() { "Some" } else { "None" };
                let takes = match fn_name.strip_suffix("_compact") {
                    Some(full) => full.to_string(),
                    None => format!("{fn_name}_compact"),
                };
                return Err(Error::new(
                    Status::InvalidArgument,
                    format!("{fn_name}: args.compact is {is}: the layout of this call is {takes}'s"),
                ));
            }
        };
        let counts = Counts::of(a.cu_seqlens, layout.map(|l| l.qo_indptr));
        let (n, n_seqs, rows) = (counts.n_tokens, counts.n_seqs, counts.rows());
        let (qd, kvd) = (a.n_heads.saturating_mul(a.head_dim), a.n_kv_heads.saturating_mul(a.head_dim));
        let m = &*self.model;
        let q = a.q.checked(fn_name, "q", m, rows, qd)?;
        let k = a.k.checked(fn_name, "k", m, rows, kvd)?;
        let v = a.v.checked(fn_name, "v", m, rows, kvd)?;
        let out = a.out.checked(fn_name, "out", m, rows, qd)?;
        let null = core::ptr::null::<u32>();
        let (qo_indptr, kv_indptr, kv_indices, device) = match layout {
            None => (null, null, null, [a.cu_seqlens_device, null, null, null]),
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
                let (qo, kvi) = (layout.qo_indptr.as_ptr(), layout.kv_indices.as_ptr());
                let [qo_device, kvi_device] = layout.device;
                (qo, a.cu_seqlens.as_ptr(), kvi, [a.cu_seqlens_device, qo_device, a.cu_seqlens_device, kvi_device])
            }
        };
        let raw = sys::rmlp_attention_args {
            layer: to_u32(fn_name, "layer", a.layer)?,
            n_tokens: to_u32(fn_name, "n_tokens", n)?,
            n_seqs: to_u32(fn_name, "n_seqs", n_seqs)?,
            n_heads: to_u32(fn_name, "n_heads", a.n_heads)?,
            n_kv_heads: to_u32(fn_name, "n_kv_heads", a.n_kv_heads)?,
            head_dim: to_u32(fn_name, "head_dim", a.head_dim)?,
            scale: a.scale,
            dtype: self.model.dtype().raw(),
            cu_seqlens: a.cu_seqlens.as_ptr(),
            q,
            k,
            v,
            out,
            stream: core::ptr::null_mut(),
            cu_seqlens_device: device[0],
            max_seqlen: 0,
            layout: if compact { sys::RMLP_ATTENTION_COMPACT } else { sys::RMLP_ATTENTION_FULL },
            n_compact: if compact { to_u32(fn_name, "n_compact", rows)? } else { 0 },
            qo_indptr,
            kv_indptr,
            kv_indices,
            qo_indptr_device: device[1],
            kv_indptr_device: device[2],
            kv_indices_device: device[3],
            sliding_window: to_u32(fn_name, "sliding_window", a.sliding_window)?,
            softcap: a.softcap,
        };
        // SAFETY: the buffers are the model's memory holding `rows` rows of their widths (n_tokens
        // = cu_seqlens[n_seqs] in full space, n_compact = qo_indptr[n_seqs] in compact space; the
        // library checks that both are non-decreasing and every kv_indices entry is below
        // n_compact, so nothing reaches further); qo_indptr has n_seqs + 1 entries and kv_indices
        // n_tokens; device arrays are the host's (vouched for) or NULL: the set plan's.
        Error::check(unsafe {
            if compact {
                sys::rmlp_attention_compact(self.raw.as_ptr(), &raw)
            } else {
                sys::rmlp_attention(self.raw.as_ptr(), &raw)
            }
        })
    }
}

/// One attention call's arguments, from host or device args alike.
struct Call<'a> {
    layer: usize,
    n_heads: usize,
    n_kv_heads: usize,
    head_dim: usize,
    scale: f32,
    sliding_window: usize,
    softcap: f32,
    cu_seqlens: &'a [u32],
    /// Device offsets, NULL for the set plan's (and on the CPU: the host's are used).
    cu_seqlens_device: *const u32,
    q: Buffer<'a>,
    k: Buffer<'a>,
    v: Buffer<'a>,
    out: BufferMut<'a>,
    compact: Option<CallLayout<'a>>,
}

#[derive(Clone, Copy)]
struct CallLayout<'a> {
    qo_indptr: &'a [u32],
    kv_indices: &'a [u32],
    /// qo_indptr and kv_indices on the device, NULL for the set plan's or on the CPU.
    device: [*const u32; 2],
}

impl<'a> Call<'a> {
    fn host(a: &'a mut AttentionArgs<'_>) -> Call<'a> {
        let cu = a.cu_seqlens;
        Call {
            layer: a.layer,
            n_heads: a.n_heads,
            n_kv_heads: a.n_kv_heads,
            head_dim: a.head_dim,
            scale: a.scale,
            sliding_window: a.sliding_window,
            softcap: a.softcap,
            cu_seqlens: cu,
            // the CPU reads the host arrays; these equal them, as in the library's own args
            cu_seqlens_device: cu.as_ptr(),
            q: a.q.into(),
            k: a.k.into(),
            v: a.v.into(),
            out: (&mut *a.out).into(),
            compact: a.compact.map(|l| CallLayout {
                qo_indptr: l.qo_indptr,
                kv_indices: l.kv_indices,
                device: [l.qo_indptr.as_ptr(), l.kv_indices.as_ptr()],
            }),
        }
    }

    fn device(a: &'a mut DeviceAttentionArgs<'_>) -> Call<'a> {
        let ptr = |d: Option<crate::DeviceIndices<'_>>| d.map_or(core::ptr::null(), |d| d.as_ptr());
        Call {
            layer: a.layer,
            n_heads: a.n_heads,
            n_kv_heads: a.n_kv_heads,
            head_dim: a.head_dim,
            scale: a.scale,
            sliding_window: a.sliding_window,
            softcap: a.softcap,
            cu_seqlens: a.cu_seqlens,
            cu_seqlens_device: ptr(a.cu_seqlens_device),
            q: a.q.into(),
            k: a.k.into(),
            v: a.v.into(),
            out: (&mut a.out).into(),
            compact: a.compact.map(|l| CallLayout {
                qo_indptr: l.qo_indptr,
                kv_indices: l.kv_indices,
                device: [ptr(l.qo_indptr_device), ptr(l.kv_indices_device)],
            }),
        }
    }
}
