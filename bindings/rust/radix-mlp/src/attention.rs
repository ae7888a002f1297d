//! A host's attention: [`AttentionArgs`] (one layer's attention as f32 slices, in full or compact
//! space; device_attention.rs has a CUDA model's), and the C callback (`trampoline`) through which
//! the library calls the host's function from `rmlp_forward`, its error or panic turned into a
//! status.
use core::ffi::c_void;
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use radix_mlp_sys as sys;

use crate::device_attention::{device_args_view, DeviceAttentionArgs};
use crate::error::{Error, Status};
use crate::types::AttentionSpace;
#[cfg(doc)] // the documentation links to it
use crate::{Context, Model};

/// One layer's attention in f32: causal attention of every sequence over its own rows, query
/// head `h` reading KV head `h / (n_heads / n_kv_heads)`. The library hands one to the callback
/// of [`Context::forward_with_attention`] and [`Context::forward_compact_with_attention`]; a host
/// fills one in to call [`Context::attention`] or [`Context::attention_compact`].
///
/// Two layouts: full space (`compact` is `None`), where `q`, `k`, `v` and `out` have a row per
/// batch row (n_tokens), or compact space (`compact` is `Some`), where they have a row per
/// compact row (n_compact): sequence `s` owns the queries `qo_indptr[s] .. qo_indptr[s+1]`,
/// the last of its path, and reads the keys and values of its path, the rows
/// `kv_indices[cu_seqlens[s] .. cu_seqlens[s+1]]`, causal aligned bottom-right (its owned query
/// `t` of `q_s` sees path positions `0 ..= L_s - q_s + t`). Those are the arrays of a FlashInfer
/// paged prefill with page size 1 (`kv_indptr` = `cu_seqlens`, `kv_indices`).
#[derive(Debug)]
pub struct AttentionArgs<'a> {
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
    /// (n_seqs + 1) row offsets of the sequences in the batch (`kv_indptr` in compact space).
    pub cu_seqlens: &'a [u32],
    /// (rows, n_heads, head_dim) queries, RoPE applied.
    pub q: &'a [f32],
    /// (rows, n_kv_heads, head_dim) keys, RoPE applied.
    pub k: &'a [f32],
    /// (rows, n_kv_heads, head_dim) values.
    pub v: &'a [f32],
    /// (rows, n_heads, head_dim) output.
    pub out: &'a mut [f32],
    /// The compact layout, or `None` for full space.
    pub compact: Option<CompactLayout<'a>>,
}

/// One layer's attention as the model runs it ([`Model::layer_attention`]): the scale, sliding
/// window and soft-cap that [`AttentionArgs`] carry, for a host filling its args around the
/// per-layer calls.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerAttention {
    /// [`AttentionArgs::scale`].
    pub scale: f32,
    /// [`AttentionArgs::sliding_window`]: keys, 0 for none.
    pub sliding_window: usize,
    /// [`AttentionArgs::softcap`]: 0 for none.
    pub softcap: f32,
}

/// The layout of attention in compact space ([`AttentionArgs::compact`]): the plan's arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactLayout<'a> {
    /// (n_seqs + 1) the compact rows each sequence owns (its queries); the last entry is n_compact.
    pub qo_indptr: &'a [u32],
    /// (n_tokens) each sequence's path, `cu_seqlens[s] .. cu_seqlens[s+1]`: the plan's `scatter`.
    pub kv_indices: &'a [u32],
}

/// The counting methods of an args type with `cu_seqlens` and an optional compact layout with
/// `qo_indptr` (AttentionArgs here, DeviceAttentionArgs in device_attention.rs).
macro_rules! attention_counts {
    ($args:ident) => {
        impl $args<'_> {
            fn counts(&self) -> $crate::attention::Counts {
                $crate::attention::Counts::of(self.cu_seqlens, self.compact.map(|c| c.qo_indptr))
            }
            /// Rows of the batch: `cu_seqlens[n_seqs]` (0 when `cu_seqlens` is empty).
            pub fn n_tokens(&self) -> usize {
                self.counts().n_tokens
            }
            /// Sequences of the batch: `cu_seqlens.len() - 1`.
            pub fn n_seqs(&self) -> usize {
                self.counts().n_seqs
            }
            /// [`AttentionSpace::Full`](crate::AttentionSpace::Full) or
            /// [`AttentionSpace::Compact`](crate::AttentionSpace::Compact): the layout of `q`, `k`,
            /// `v`, `out`.
            pub fn layout(&self) -> $crate::AttentionSpace {
                self.counts().layout()
            }
            /// N': the compact rows (`qo_indptr[n_seqs]`) in compact space, 0 in full space.
            pub fn n_compact(&self) -> usize {
                self.counts().n_compact.unwrap_or(0)
            }
            /// Rows of `q`, `k`, `v` and `out`: [`n_compact`](Self::n_compact) in compact space,
            /// [`n_tokens`](Self::n_tokens) in full space.
            pub fn n_rows(&self) -> usize {
                self.counts().rows()
            }
        }
    };
}
pub(crate) use attention_counts;

attention_counts!(AttentionArgs);

/// An attention call's counts, from its offsets and, in compact space, its `qo_indptr`.
pub(crate) struct Counts {
    /// `cu_seqlens[n_seqs]` (0 when empty).
    pub(crate) n_tokens: usize,
    pub(crate) n_seqs: usize,
    /// `qo_indptr[n_seqs]` in compact space (0 when empty), `None` in full space.
    pub(crate) n_compact: Option<usize>,
}

impl Counts {
    pub(crate) fn of(cu_seqlens: &[u32], qo_indptr: Option<&[u32]>) -> Counts {
        let last = |a: &[u32]| a.last().map_or(0, |&n| n as usize);
        Counts {
            n_tokens: last(cu_seqlens),
            n_seqs: cu_seqlens.len().saturating_sub(1),
            n_compact: qo_indptr.map(last),
        }
    }

    /// Rows of q, k, v and out: n_compact in compact space, n_tokens in full space.
    pub(crate) fn rows(&self) -> usize {
        self.n_compact.unwrap_or(self.n_tokens)
    }

    pub(crate) fn layout(&self) -> AttentionSpace {
        if self.n_compact.is_some() {
            AttentionSpace::Compact
        } else {
            AttentionSpace::Full
        }
    }
}

/// A slice of `len` values at `ptr`, empty when `len` is 0; `None` for NULL with `len > 0`.
///
/// # Safety
/// When non-NULL and `len > 0`, `ptr` must point at `len` values valid and unaliased for `'a`.
pub(crate) unsafe fn raw_slice<'a, T>(ptr: *mut T, len: usize) -> Option<&'a mut [T]> {
    match (len, ptr.is_null()) {
        (0, _) => Some(&mut []),
        (_, true) => None,
        _ => Some(core::slice::from_raw_parts_mut(ptr, len)),
    }
}

/// A host's attention, as the `*_with_attention` methods take it: on host slices (a CPU model) or
/// on device slices (a CUDA model).
pub(crate) enum HostAttention<'f> {
    Host(&'f mut dyn FnMut(&mut AttentionArgs<'_>) -> Result<(), Error>),
    Device(&'f mut dyn FnMut(&mut DeviceAttentionArgs<'_>) -> Result<(), Error>),
}

/// The callback's state: the host's function and the error it returned, kept in full because
/// `rmlp_forward` replaces the thread's message with its own.
pub(crate) struct Callback<'f> {
    pub(crate) attention: HostAttention<'f>,
    pub(crate) error: Option<Error>,
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("?")
}

/// The library's args as slices; `None` for a NULL buffer or a dtype other than F32.
///
/// # Safety
/// `a`'s buffers must have the shapes its fields give, be distinct, and stay valid and
/// untouched by anyone else for `'a`.
unsafe fn args_view(a: &sys::rmlp_attention_args) -> Option<AttentionArgs<'_>> {
    let (n, n_seqs) = (a.n_tokens as usize, a.n_seqs as usize);
    let (qd, kvd) = (a.n_heads as usize * a.head_dim as usize, a.n_kv_heads as usize * a.head_dim as usize);
    if a.dtype != sys::RMLP_DTYPE_F32 {
        return None;
    }
    let (rows, compact) = match AttentionSpace::from_raw(a.layout)? {
        AttentionSpace::Full => (n, None),
        AttentionSpace::Compact => (
            a.n_compact as usize,
            Some(CompactLayout {
                qo_indptr: raw_slice(a.qo_indptr.cast_mut(), n_seqs + 1)?,
                kv_indices: raw_slice(a.kv_indices.cast_mut(), n)?,
            }),
        ),
        AttentionSpace::Auto => return None,
    };
    Some(AttentionArgs {
        layer: a.layer as usize,
        n_heads: a.n_heads as usize,
        n_kv_heads: a.n_kv_heads as usize,
        head_dim: a.head_dim as usize,
        scale: a.scale,
        sliding_window: a.sliding_window as usize,
        softcap: a.softcap,
        cu_seqlens: raw_slice(a.cu_seqlens.cast_mut(), n_seqs + 1)?,
        q: raw_slice(a.q.cast::<f32>().cast_mut(), rows * qd)?,
        k: raw_slice(a.k.cast::<f32>().cast_mut(), rows * kvd)?,
        v: raw_slice(a.v.cast::<f32>().cast_mut(), rows * kvd)?,
        out: raw_slice(a.out.cast::<f32>(), rows * qd)?,
        compact,
    })
}

/// The `rmlp_attention_fn` of [`Context::forward_with_attention`]: the args as slices, the
/// host's function, its error or panic turned into a status (unwinding into C is undefined).
pub(crate) unsafe extern "C" fn trampoline(
    user_data: *mut c_void,
    args: *const sys::rmlp_attention_args,
) -> sys::rmlp_status {
    // SAFETY: `user_data` is the `Callback` that forward_with_attention passed, alive and not
    // otherwise borrowed during rmlp_forward.
    let state = unsafe { &mut *user_data.cast::<Callback<'_>>() };
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the library passes valid args whose buffers are its context's distinct
        // workspace arrays of these shapes, alive and untouched during the call.
        let a = unsafe { &*args };
        let ran = match &mut state.attention {
            HostAttention::Host(f) => unsafe { args_view(a) }.map(|mut view| f(&mut view)),
            HostAttention::Device(f) => unsafe { device_args_view(a) }.map(|mut view| f(&mut view)),
        };
        ran.unwrap_or_else(|| {
            Err(Error::new(
                Status::Internal,
                format!(
                    "attention args of layer {}: NULL, dtype {} or layout {} unknown (or not F32 for host slices)",
                    a.layer, a.dtype, a.layout
                ),
            ))
        })
    }));
    let error = match result {
        Ok(Ok(())) => return sys::RMLP_OK,
        Ok(Err(e)) => e,
        Err(payload) => {
            let e =
                Error::new(Status::Internal, format!("the attention callback panicked: {}", panic_message(&*payload)));
            // Dropping the payload may panic too; never let that unwind into C.
            if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
                core::mem::forget(again);
            }
            e
        }
    };
    let code = error.status.code();
    state.error = Some(error);
    if code < 0 {
        code
    } else {
        sys::RMLP_ERR_INTERNAL
    }
}
