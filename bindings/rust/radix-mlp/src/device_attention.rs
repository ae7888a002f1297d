//! A host's attention on a CUDA model: [`DeviceAttentionArgs`] (one layer's attention as device
//! slices in the model's dtype, the context's stream, and the layout's arrays on the host and on
//! the device), which the library hands to the callback of
//! [`Context::forward_with_device_attention`] and a host fills in for
//! [`Context::device_attention`]; and its view of the library's `rmlp_attention_args`.
use radix_mlp_sys as sys;

use crate::attention::{attention_counts, raw_slice};
use crate::device::{DeviceIndices, DeviceSlice, DeviceSliceMut, Stream};
use crate::types::{AttentionSpace, DType};
#[cfg(doc)] // the documentation links to it
use crate::{AttentionArgs, Context, Model};

/// One layer's attention on a CUDA model: [`AttentionArgs`]'s shapes and layouts (full space, or
/// compact space with [`compact`](Self::compact)), with `q`, `k`, `v` and `out` device memory in
/// the model's dtype. In a callback the host enqueues its kernels on [`stream`](Self::stream)
/// and returns without synchronising (the library goes on enqueuing after it); it may read the
/// offsets on the host (to size its launch) or on the device (the copies the context made at
/// [`Context::set_plan`], valid until the next one).
#[derive(Debug)]
pub struct DeviceAttentionArgs<'a> {
    pub layer: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// The scores' scale: the layer's (`1 / sqrt(head_dim)`, Gemma's `query_pre_attn_scalar^-0.5`;
    /// [`Model::layer_attention`] gives it).
    pub scale: f32,
    /// The layer's sliding window in keys, 0 for none: a query at index `p` of its sequence (its
    /// path position in compact space) sees the keys at `p + 1 - sliding_window ..= p` (from 0),
    /// `sliding_window` keys, itself included (transformers' mask; flash-attention's
    /// `window_size = (sliding_window - 1, 0)`). [`Model::layer_attention`] gives a layer's.
    pub sliding_window: usize,
    /// The layer's logit soft-cap, 0 for none: scaled scores `s` become `softcap * tanh(s / softcap)`
    /// before the softmax (Gemma 2).
    pub softcap: f32,
    /// The longest sequence in rows (varlen flash-attention's `max_seqlen`); 0 in args a host
    /// fills in (the built-in attention sizes its launch from counts).
    pub max_seqlen: usize,
    /// (n_seqs + 1) row offsets of the sequences, host memory (`kv_indptr` in compact space).
    pub cu_seqlens: &'a [u32],
    /// The same offsets on the device; `None` in args a host fills in: the set plan's copy (then
    /// `cu_seqlens` must be the set plan's).
    pub cu_seqlens_device: Option<DeviceIndices<'a>>,
    /// (rows, n_heads, head_dim) queries, RoPE applied.
    pub q: DeviceSlice<'a>,
    /// (rows, n_kv_heads, head_dim) keys, RoPE applied.
    pub k: DeviceSlice<'a>,
    /// (rows, n_kv_heads, head_dim) values.
    pub v: DeviceSlice<'a>,
    /// (rows, n_heads, head_dim) output.
    pub out: DeviceSliceMut<'a>,
    /// The context's stream (ignored by [`Context::device_attention`], which uses it anyway).
    pub stream: Stream,
    /// The compact layout, or `None` for full space.
    pub compact: Option<DeviceCompactLayout<'a>>,
}

/// The layout of attention in compact space on a CUDA model: [`CompactLayout`](crate::CompactLayout)'s
/// arrays on the host and on the device.
#[derive(Clone, Copy, Debug)]
pub struct DeviceCompactLayout<'a> {
    /// (n_seqs + 1) the compact rows each sequence owns; the last entry is n_compact.
    pub qo_indptr: &'a [u32],
    /// (n_tokens) each sequence's path: the plan's `scatter`.
    pub kv_indices: &'a [u32],
    /// The two on the device; `None` in args a host fills in: the set plan's copies (then the
    /// host arrays must be the set plan's, and `cu_seqlens_device` `None` too).
    pub qo_indptr_device: Option<DeviceIndices<'a>>,
    pub kv_indices_device: Option<DeviceIndices<'a>>,
}

attention_counts!(DeviceAttentionArgs);

impl DeviceAttentionArgs<'_> {
    /// The dtype of `q`, `k`, `v`, `out`: the model's.
    pub fn dtype(&self) -> DType {
        self.q.dtype()
    }
}

/// `len` u32 at `ptr` on the device, `None` for NULL.
///
/// # Safety
/// A non-NULL `ptr` must hold `len` u32 of device memory valid for `'a`.
unsafe fn device_indices<'a>(ptr: *const u32, len: usize) -> Option<DeviceIndices<'a>> {
    (!ptr.is_null()).then(|| DeviceIndices::from_raw_parts(ptr, len))
}

/// The library's args of a CUDA model as device slices; `None` for an unknown dtype or layout, or
/// a NULL host array.
///
/// # Safety
/// `a`'s buffers must have the shapes its fields give, in device memory of its dtype (its host
/// arrays in host memory), be distinct, and stay valid and untouched by anyone else for `'a`.
pub(crate) unsafe fn device_args_view(a: &sys::rmlp_attention_args) -> Option<DeviceAttentionArgs<'_>> {
    let (n, n_seqs) = (a.n_tokens as usize, a.n_seqs as usize);
    let (qd, kvd) = (a.n_heads as usize * a.head_dim as usize, a.n_kv_heads as usize * a.head_dim as usize);
    let dtype = DType::from_raw(a.dtype)?;
    let (rows, compact) = match AttentionSpace::from_raw(a.layout)? {
        AttentionSpace::Full => (n, None),
        AttentionSpace::Compact => (
            a.n_compact as usize,
            Some(DeviceCompactLayout {
                qo_indptr: raw_slice(a.qo_indptr.cast_mut(), n_seqs + 1)?,
                kv_indices: raw_slice(a.kv_indices.cast_mut(), n)?,
                qo_indptr_device: device_indices(a.qo_indptr_device, n_seqs + 1),
                kv_indices_device: device_indices(a.kv_indices_device, n),
            }),
        ),
        AttentionSpace::Auto => return None,
    };
    Some(DeviceAttentionArgs {
        layer: a.layer as usize,
        n_heads: a.n_heads as usize,
        n_kv_heads: a.n_kv_heads as usize,
        head_dim: a.head_dim as usize,
        scale: a.scale,
        sliding_window: a.sliding_window as usize,
        softcap: a.softcap,
        max_seqlen: a.max_seqlen as usize,
        cu_seqlens: raw_slice(a.cu_seqlens.cast_mut(), n_seqs + 1)?,
        cu_seqlens_device: device_indices(a.cu_seqlens_device, n_seqs + 1),
        q: DeviceSlice::from_raw_parts(a.q, rows * qd, dtype),
        k: DeviceSlice::from_raw_parts(a.k, rows * kvd, dtype),
        v: DeviceSlice::from_raw_parts(a.v, rows * kvd, dtype),
        out: DeviceSliceMut::from_raw_parts(a.out, rows * qd, dtype),
        stream: Stream::from_raw(a.stream),
        compact,
    })
}
