//! Contexts: one thread's workspace on a [`Model`] ([`Context`], holding its model by borrow or
//! by `Arc`), running a batch whole ([`Context::forward`] into batch rows, `forward_compact` into
//! compact rows, `forward_last` into each sequence's last row; with the built-in attention or the
//! host's, on host slices or on a CUDA model's device slices). The per-layer calls, for hosts that
//! keep attention, are in context/layers.rs, the read-outs (pooling, reranker scores) in
//! context/readout.rs.
use core::marker::PhantomData;
use core::ptr::NonNull;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use radix_mlp_sys as sys;

use crate::attention::{trampoline, AttentionArgs, Callback, HostAttention};
use crate::buffer::BufferMut;
use crate::device::Stream;
use crate::device_attention::DeviceAttentionArgs;
use crate::error::{Error, Status};
use crate::model::Model;
use crate::planner::AsPlan;
use crate::types::{AttentionSpace, CacheStats, ContextParams, Device, ModelConfig};
#[cfg(doc)] // the documentation links to it
use crate::DeviceSliceMut;

mod layers;
mod readout;

/// A workspace for running batches of up to `max_tokens` tokens through a [`Model`]
/// (`rmlp_context`); calls through it never allocate. `Send` but not `Sync`: one per thread.
///
/// It holds its model by `M`: a borrow, `Context<'m>` from [`Model::context`], or a share,
/// [`SharedContext`] (`Context<'static, Arc<Model>>`) from [`Context::new`], which keeps the
/// model alive and ties the context to no borrow, so that a server keeps it in one struct beside
/// anything else or moves it into a `'static` thread or task.
///
/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<radix_mlp::Context<'static>>();
/// ```
pub struct Context<'m, M: ModelHolder = &'m Model> {
    raw: NonNull<sys::rmlp_context>,
    /// Dropped after `raw` is freed (Drop runs before the fields), so the model outlives it.
    model: M,
    params: ContextParams,
    _borrow: PhantomData<&'m Model>,
}

/// A context holding a share of its model: what [`Context::new`] makes.
pub type SharedContext = Context<'static, Arc<Model>>;

mod holder {
    pub trait Sealed {}
    impl Sealed for &super::Model {}
    impl Sealed for std::sync::Arc<super::Model> {}
}

/// How a [`Context`] holds its model: `&Model` or `Arc<Model>` (sealed: the context trusts it to
/// give the model it was made for, every time).
pub trait ModelHolder: Deref<Target = Model> + holder::Sealed {}
impl ModelHolder for &Model {}
impl ModelHolder for Arc<Model> {}

// SAFETY: a context is heap memory with no thread affinity, used by one thread at a time
// (`&mut self` on every call, !Sync); the model it reads is Sync, and `M: Send` moves its holder.
unsafe impl<M: ModelHolder + Send> Send for Context<'_, M> {}

/// Making contexts: a model's own way to give one a workspace.
impl Model {
    /// A workspace for batches of up to `max_tokens` tokens (`rmlp_context_create`), borrowing
    /// the model; [`Context::new`] makes one that holds an `Arc` of it instead ([`SharedContext`]).
    pub fn context(&self, max_tokens: usize) -> Result<Context<'_>, Error> {
        self.context_with(max_tokens, ContextParams::default())
    }

    /// [`context`](Self::context) with `params` (`rmlp_context_create_with_params`), such as
    /// attention in compact space:
    ///
    /// ```no_run
    /// use radix_mlp::{AttentionSpace, ContextParams, Model};
    ///
    /// let model = Model::load("integration_tests/fixtures/qwen3_tiny")?;
    /// let params = ContextParams { attention_space: AttentionSpace::Auto, ..ContextParams::default() };
    /// let ctx = model.context_with(16384, params)?;
    /// assert_eq!(ctx.attention_space(), AttentionSpace::Auto);
    /// // With a 64 MiB prefix cache: later batches reuse the rows earlier ones computed.
    /// let cached = model.context_with(16384, ContextParams { cache_bytes: 64 << 20, ..ContextParams::default() })?;
    /// assert_eq!(cached.cache_stats()?.bytes_budget, 64 << 20);
    /// # Ok::<(), radix_mlp::Error>(())
    /// ```
    pub fn context_with(&self, max_tokens: usize, params: ContextParams) -> Result<Context<'_>, Error> {
        Ok(Context { raw: self.create_context(max_tokens, &params)?, model: self, params, _borrow: PhantomData })
    }

    /// `rmlp_context_create_with_params`; the caller ties the context to this model's lifetime.
    fn create_context(&self, max_tokens: usize, params: &ContextParams) -> Result<NonNull<sys::rmlp_context>, Error> {
        let mut raw = core::ptr::null_mut();
        let raw_params = params.raw();
        // SAFETY: `self.raw` is a live model, which every context is made to outlive; `raw_params`
        // a valid params struct; `raw` is an out pointer.
        Error::check(unsafe {
            sys::rmlp_context_create_with_params(self.raw.as_ptr(), max_tokens, &raw_params, &mut raw)
        })?;
        NonNull::new(raw).ok_or_else(|| Error::new(Status::Internal, "rmlp_context_create returned OK and NULL".into()))
    }
}

impl<'m> Context<'m> {
    /// The model this context runs.
    pub fn model(&self) -> &'m Model {
        self.model
    }
}

impl<'m> Context<'m, Arc<Model>> {
    /// A workspace for batches of up to `max_tokens` tokens (`rmlp_context_create`) that holds a
    /// share of its model and keeps it alive; the model is freed with its last holder.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use radix_mlp::{Context, Model, SharedContext};
    ///
    /// let model = Arc::new(Model::load("integration_tests/fixtures/qwen3_tiny")?);
    /// let mut ctx: SharedContext = Context::new(Arc::clone(&model), 16384)?; // one per worker
    /// let worker = std::thread::spawn(move || {
    ///     // ctx.forward(&plan, &mut out) for every batch this thread takes
    ///     ctx.model().config().hidden_size
    /// });
    /// assert_eq!(worker.join().unwrap(), model.config().hidden_size);
    /// # Ok::<(), radix_mlp::Error>(())
    /// ```
    pub fn new(model: Arc<Model>, max_tokens: usize) -> Result<Context<'m, Arc<Model>>, Error> {
        Context::new_with(model, max_tokens, ContextParams::default())
    }

    /// [`new`](Self::new) with `params` (`rmlp_context_create_with_params`), such as
    /// [`AttentionSpace::Compact`].
    pub fn new_with(
        model: Arc<Model>,
        max_tokens: usize,
        params: ContextParams,
    ) -> Result<Context<'m, Arc<Model>>, Error> {
        Ok(Context { raw: model.create_context(max_tokens, &params)?, model, params, _borrow: PhantomData })
    }

    /// The model this context runs, as the share it holds (clone it for another worker's context).
    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }
}

impl<M: ModelHolder> Context<'_, M> {
    /// Where [`forward`](Self::forward) runs attention ([`ContextParams::attention_space`]).
    pub fn attention_space(&self) -> AttentionSpace {
        self.params.attention_space
    }

    /// The prefix cache's counters since the context was made (`rmlp_context_cache_stats`; all
    /// zero for a context without a cache, [`ContextParams::cache_bytes`]).
    pub fn cache_stats(&self) -> Result<CacheStats, Error> {
        let mut out = sys::rmlp_cache_stats::default();
        // SAFETY: `self.raw` is a live context (no other thread uses it: !Sync); `out` an out pointer.
        Error::check(unsafe { sys::rmlp_context_cache_stats(self.raw.as_ptr(), &mut out) })?;
        Ok(CacheStats::from(&out))
    }

    /// Empties the prefix cache (`rmlp_context_cache_clear`): the next batches compute every
    /// row again; the counters stay. Does nothing on a context without a cache.
    pub fn cache_clear(&mut self) -> Result<(), Error> {
        // SAFETY: `self.raw` is a live context, borrowed mutably for the call.
        Error::check(unsafe { sys::rmlp_context_cache_clear(self.raw.as_ptr()) })
    }

    /// The live handle, borrowed mutably, for the crate's other modules (batcher.rs).
    pub(crate) fn raw_mut(&mut self) -> *mut sys::rmlp_context {
        self.raw.as_ptr()
    }

    /// Per-batch setup (`rmlp_context_set_plan`): on CUDA, copies the plan's maps to the device
    /// on the context's stream; every later call with this plan checks it is the one set. A
    /// no-op on the CPU.
    pub fn set_plan<P: AsPlan + ?Sized>(&mut self, plan: &P) -> Result<(), Error> {
        let raw = plan.as_raw()?;
        // SAFETY: `raw` points into `plan`, borrowed for the call (the library copies it).
        Error::check(unsafe { sys::rmlp_context_set_plan(self.raw.as_ptr(), &raw) })
    }

    /// The stream every later call enqueues on (`rmlp_context_set_stream`; [`Stream::LEGACY`]:
    /// the legacy default stream, where a context starts). Work already enqueued on the previous
    /// stream is ordered before anything on the new one. Ignored on the CPU.
    pub fn set_stream(&mut self, stream: Stream) -> Result<(), Error> {
        // SAFETY: whoever made `stream` vouched that it lives while contexts use it.
        Error::check(unsafe { sys::rmlp_context_set_stream(self.raw.as_ptr(), stream.as_raw()) })
    }

    /// The context's handle and its model's configuration, for the crate's other modules
    /// (generate.rs).
    pub(crate) fn raw_ptr(&self) -> *mut sys::rmlp_context {
        self.raw.as_ptr()
    }

    pub(crate) fn model_config(&self) -> &ModelConfig {
        &self.model.config
    }

    /// The C plan, with the one check the library leaves out: padding rows' token ids, which
    /// `rmlp_embed` and `rmlp_forward` read without checking them against vocab_size.
    pub(crate) fn plan<P: AsPlan + ?Sized>(&self, fn_name: &str, plan: &P) -> Result<sys::rmlp_plan, Error> {
        let raw = plan.as_raw()?;
        let vocab = self.model.config.vocab_size;
        if raw.n_compact <= raw.n_compact_padded && raw.n_compact_padded > 0 {
            // SAFETY: as_raw checked that compact_input_ids has n_compact_padded entries.
            let ids = unsafe { core::slice::from_raw_parts(raw.compact_input_ids, raw.n_compact_padded as usize) };
            if let Some(j) = (raw.n_compact as usize..ids.len()).find(|&j| ids[j] as usize >= vocab) {
                return Err(Error::new(
                    Status::InvalidArgument,
                    format!("{fn_name}: padding row {j} has compact_input_ids[{j}]={} >= vocab_size={vocab}", ids[j]),
                ));
            }
        }
        Ok(raw)
    }

    /// The whole model on one batch with the built-in attention (`rmlp_forward`, in the
    /// context's [`attention_space`](Self::attention_space)): `out` (at least n_tokens x
    /// hidden_size) receives the last hidden states of every batch row. On CUDA, after
    /// [`set_plan`](Self::set_plan) with the same plan, `out` is a [`DeviceSliceMut`] in the
    /// model's dtype, and the forward is enqueued on the context's stream (no synchronisation).
    pub fn forward<'b, P: AsPlan + ?Sized>(&mut self, plan: &P, out: impl Into<BufferMut<'b>>) -> Result<(), Error> {
        self.run_forward("radix_mlp::Context::forward", plan, out.into(), None, Rows::Batch)
    }

    /// [`forward`](Self::forward) with the host's attention, called once per layer in the layout
    /// of the context's [`attention_space`](Self::attention_space) (see [`AttentionArgs`]), on a
    /// CPU model ([`forward_with_device_attention`](Self::forward_with_device_attention) is a CUDA
    /// model's). An error it returns, or a panic (caught: status `Internal`), stops the forward;
    /// the result carries the library's message (which layer) followed by the host's. A context
    /// with a prefix cache ([`ContextParams::cache_bytes`]) refuses it (`Status::Unsupported`).
    pub fn forward_with_attention<'b, P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        out: impl Into<BufferMut<'b>>,
        attention: &mut dyn FnMut(&mut AttentionArgs<'_>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let fn_name = "radix_mlp::Context::forward_with_attention";
        self.run_forward(fn_name, plan, out.into(), Some(HostAttention::Host(attention)), Rows::Batch)
    }

    /// [`forward_with_attention`](Self::forward_with_attention) on a CUDA model: `out` a
    /// [`DeviceSliceMut`], and the host's attention gets [`DeviceAttentionArgs`] (device slices
    /// in the model's dtype, the context's stream), enqueues its work on that stream and returns.
    pub fn forward_with_device_attention<'b, P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        out: impl Into<BufferMut<'b>>,
        attention: &mut dyn FnMut(&mut DeviceAttentionArgs<'_>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let fn_name = "radix_mlp::Context::forward_with_device_attention";
        self.run_forward(fn_name, plan, out.into(), Some(HostAttention::Device(attention)), Rows::Batch)
    }

    /// The whole model on one batch in compact space, embedding to final norm on the compact
    /// rows, with the built-in attention (`rmlp_forward_compact`, whatever the context's
    /// setting): `out` (at least n_compact_padded x hidden_size) receives the final-normed compact
    /// rows; batch row `i`'s state is row `scatter[i]`. Read them out with
    /// [`pool_compact`](Self::pool_compact) or [`score_pair_compact`](Self::score_pair_compact).
    /// On CUDA as [`forward`](Self::forward).
    pub fn forward_compact<'b, P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        out: impl Into<BufferMut<'b>>,
    ) -> Result<(), Error> {
        self.run_forward("radix_mlp::Context::forward_compact", plan, out.into(), None, Rows::Compact)
    }

    /// [`forward_compact`](Self::forward_compact) with the host's attention, which gets the
    /// compact layout ([`AttentionArgs::compact`]); errors and panics as in
    /// [`forward_with_attention`](Self::forward_with_attention).
    pub fn forward_compact_with_attention<'b, P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        out: impl Into<BufferMut<'b>>,
        attention: &mut dyn FnMut(&mut AttentionArgs<'_>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let fn_name = "radix_mlp::Context::forward_compact_with_attention";
        self.run_forward(fn_name, plan, out.into(), Some(HostAttention::Host(attention)), Rows::Compact)
    }

    /// [`forward_compact_with_attention`](Self::forward_compact_with_attention) on a CUDA model,
    /// as [`forward_with_device_attention`](Self::forward_with_device_attention).
    pub fn forward_compact_with_device_attention<'b, P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        out: impl Into<BufferMut<'b>>,
        attention: &mut dyn FnMut(&mut DeviceAttentionArgs<'_>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let fn_name = "radix_mlp::Context::forward_compact_with_device_attention";
        self.run_forward(fn_name, plan, out.into(), Some(HostAttention::Device(attention)), Rows::Compact)
    }

    /// The whole model on one batch for a host that reads only each sequence's last row (a
    /// last-token embedding, a reranker's score), with the built-in attention
    /// (`rmlp_forward_last`, in the context's [`attention_space`](Self::attention_space)): `out`
    /// (at least n_seqs x hidden_size) receives, for sequence `s`, the final-normed state of
    /// batch row `cu_seqlens[s + 1] - 1`, the row [`forward`](Self::forward) writes there (within
    /// the GEMMs' rounding); the last layer's post-attention work runs on those n_seqs rows only.
    /// Read them with [`pool`](Self::pool) or [`score_pair`](Self::score_pair) and `cu_seqlens`
    /// 0, 1, ..., n_seqs. On CUDA as [`forward`](Self::forward).
    pub fn forward_last<'b, P: AsPlan + ?Sized>(&mut self, plan: &P, out: impl Into<BufferMut<'b>>) -> Result<(), Error> {
        self.run_forward("radix_mlp::Context::forward_last", plan, out.into(), None, Rows::Last)
    }

    /// [`forward_last`](Self::forward_last) with the host's attention, in the layout of the
    /// context's [`attention_space`](Self::attention_space), on a CPU model; errors and panics as
    /// in [`forward_with_attention`](Self::forward_with_attention).
    pub fn forward_last_with_attention<'b, P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        out: impl Into<BufferMut<'b>>,
        attention: &mut dyn FnMut(&mut AttentionArgs<'_>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let fn_name = "radix_mlp::Context::forward_last_with_attention";
        self.run_forward(fn_name, plan, out.into(), Some(HostAttention::Host(attention)), Rows::Last)
    }

    /// [`forward_last_with_attention`](Self::forward_last_with_attention) on a CUDA model, as
    /// [`forward_with_device_attention`](Self::forward_with_device_attention).
    pub fn forward_last_with_device_attention<'b, P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        out: impl Into<BufferMut<'b>>,
        attention: &mut dyn FnMut(&mut DeviceAttentionArgs<'_>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let fn_name = "radix_mlp::Context::forward_last_with_device_attention";
        self.run_forward(fn_name, plan, out.into(), Some(HostAttention::Device(attention)), Rows::Last)
    }

    /// `rmlp_forward` (batch rows), `rmlp_forward_compact` (compact rows) or `rmlp_forward_last`
    /// (each sequence's last row), with the host's attention or the built-in one.
    fn run_forward<P: AsPlan + ?Sized>(
        &mut self,
        fn_name: &str,
        plan: &P,
        mut out: BufferMut<'_>,
        attention: Option<HostAttention<'_>>,
        rows: Rows,
    ) -> Result<(), Error> {
        let raw = self.plan(fn_name, plan)?;
        let (n_rows, call): (u32, ForwardFn) = match rows {
            Rows::Batch => (raw.n_tokens, sys::rmlp_forward),
            Rows::Compact => (raw.n_compact_padded, sys::rmlp_forward_compact),
            Rows::Last => (raw.n_seqs, sys::rmlp_forward_last),
        };
        let out = out.checked(fn_name, "out", &self.model, n_rows as usize, self.model.config.hidden_size)?;
        let Some(attention) = attention else {
            // SAFETY: `raw` points into `plan`, borrowed for the call; `out` is the model's memory
            // and long enough.
            return Error::check(unsafe { call(self.raw.as_ptr(), &raw, None, core::ptr::null_mut(), out) });
        };
        let on_device = matches!(self.model.device(), Device::Cuda(_));
        if on_device != matches!(attention, HostAttention::Device(_)) {
            let (model, takes) = if on_device {
                ("a CUDA model", "device buffers: use the *_with_device_attention forwards")
            } else {
                ("a CPU model", "host slices: use forward_with_attention / forward_compact_with_attention")
            };
            return Err(Error::new(
                Status::InvalidArgument,
                format!("{fn_name}: the attention of {model} takes {takes}"),
            ));
        }
        let mut state = Callback { attention, error: None };
        // SAFETY: as above; `state` outlives the call and only the trampoline uses it.
        let code =
            unsafe { call(self.raw.as_ptr(), &raw, Some(trampoline), (&mut state as *mut Callback<'_>).cast(), out) };
        Error::check(code).map_err(|lib| match state.error.take() {
            Some(host) => Error::new(host.status, format!("{}: {}", lib.message, host.message)),
            None => lib,
        })
    }
}

/// Which rows a whole-model forward writes to `out`.
#[derive(Clone, Copy)]
enum Rows {
    /// Every batch row (`rmlp_forward`).
    Batch,
    /// The padded compact rows (`rmlp_forward_compact`).
    Compact,
    /// Each sequence's last batch row (`rmlp_forward_last`).
    Last,
}

/// The signature the three whole-model forwards share.
type ForwardFn = unsafe extern "C" fn(
    *mut sys::rmlp_context,
    *const sys::rmlp_plan,
    sys::rmlp_attention_fn,
    *mut core::ffi::c_void,
    *mut core::ffi::c_void,
) -> sys::rmlp_status;

impl<M: ModelHolder> Drop for Context<'_, M> {
    fn drop(&mut self) {
        // SAFETY: `self.raw` came from rmlp_context_create and is freed once, before its model.
        unsafe { sys::rmlp_context_free(self.raw.as_ptr()) }
    }
}

impl<M: ModelHolder> fmt::Debug for Context<'_, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Context").field(&self.raw).finish()
    }
}
