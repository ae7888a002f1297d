//! Contexts: one thread's workspace on a [`Model`] ([`Context`], holding its model by borrow or
//! by `Arc`), running a batch whole ([`Context::forward`], with the built-in attention or the
//! host's), its read-outs (pooling, reranker scores), and their `unsafe` `*_device` forms for CUDA
//! models. The per-layer calls, for hosts that keep attention, are in context/layers.rs.
use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::NonNull;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use radix_mlp_sys as sys;

use crate::attention::{trampoline, AttentionArgs, Callback, HostAttention};
use crate::error::{Error, Status};
use crate::model::{check_len, pair_scores, Model};
use crate::planner::AsPlan;
use crate::types::{AttentionSpace, CacheStats, ContextParams, Device, ModelConfig, PairScore, Pooling};

mod layers;

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

    /// Err unless the model computes in host memory (the CPU): slices are host memory.
    fn host_memory(&self, fn_name: &str) -> Result<(), Error> {
        match self.model.params.device {
            Device::Cpu => Ok(()),
            Device::Cuda(_) => Err(Error::new(
                Status::Unsupported,
                format!("{fn_name}: the model is on a CUDA device, whose activations are device memory: use the *_device methods"),
            )),
        }
    }

    /// Per-batch setup (`rmlp_context_set_plan`): on CUDA, copies the plan's maps to the device
    /// on the context's stream; every later call with this plan checks it is the one set. A
    /// no-op on the CPU.
    pub fn set_plan<P: AsPlan + ?Sized>(&mut self, plan: &P) -> Result<(), Error> {
        let raw = plan.as_raw()?;
        // SAFETY: `raw` points into `plan`, borrowed for the call (the library copies it).
        Error::check(unsafe { sys::rmlp_context_set_plan(self.raw.as_ptr(), &raw) })
    }

    /// The `cudaStream_t` every later call enqueues on (`rmlp_context_set_stream`; NULL: the
    /// legacy default stream). Ignored on the CPU.
    ///
    /// # Safety
    /// `stream` must be NULL or a live stream of the model's device that outlives its use here
    /// (until another stream is set or the context is dropped).
    pub unsafe fn set_stream(&mut self, stream: *mut c_void) -> Result<(), Error> {
        // SAFETY: the caller vouches for the stream.
        Error::check(unsafe { sys::rmlp_context_set_stream(self.raw.as_ptr(), stream) })
    }

    /// The whole model on the device (`rmlp_forward`, built-in attention), after
    /// [`set_plan`](Self::set_plan) with the same plan: enqueues on the context's stream and
    /// returns without synchronising.
    ///
    /// # Safety
    /// `out` must be device memory of the model's device with room for n_tokens x hidden_size
    /// values of the model's dtype, not used by anything else until the stream has run the forward.
    pub unsafe fn forward_device<P: AsPlan + ?Sized>(&mut self, plan: &P, out: *mut c_void) -> Result<(), Error> {
        let raw = self.plan("radix_mlp::Context::forward_device", plan)?;
        // SAFETY: `raw` points into `plan`; the caller vouches for `out`.
        Error::check(unsafe { sys::rmlp_forward(self.raw.as_ptr(), &raw, None, core::ptr::null_mut(), out) })
    }

    /// [`forward_compact`](Self::forward_compact) on the device (`rmlp_forward_compact`), after
    /// [`set_plan`](Self::set_plan) with the same plan: enqueues and returns, like
    /// [`forward_device`](Self::forward_device).
    ///
    /// # Safety
    /// `out` must be device memory of the model's device with room for n_compact_padded x
    /// hidden_size values of the model's dtype, not used by anything else until the stream has
    /// run the forward.
    pub unsafe fn forward_compact_device<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        out: *mut c_void,
    ) -> Result<(), Error> {
        let raw = self.plan("radix_mlp::Context::forward_compact_device", plan)?;
        // SAFETY: `raw` points into `plan`; the caller vouches for `out`.
        Error::check(unsafe { sys::rmlp_forward_compact(self.raw.as_ptr(), &raw, None, core::ptr::null_mut(), out) })
    }

    /// Pools `hidden` (the model's memory: device memory in its dtype on CUDA) per sequence
    /// (`rmlp_context_pool`), into host f32; on CUDA it synchronises the context's stream.
    ///
    /// # Safety
    /// `hidden` must hold `cu_seqlens[last]` rows of hidden_size values in the model's memory
    /// and dtype (host f32 on the CPU).
    pub unsafe fn pool_device(
        &mut self,
        hidden: *const c_void,
        cu_seqlens: &[u32],
        pooling: Pooling,
        normalize: bool,
    ) -> Result<Vec<f32>, Error> {
        let h = self.model.config.hidden_size;
        let n_tokens = cu_seqlens.last().map_or(0, |&n| n as usize);
        let n_seqs = cu_seqlens.len().saturating_sub(1);
        let mut out = vec![0.0f32; n_seqs * h];
        // SAFETY: `out` has n_seqs rows of hidden_size floats; the caller vouches for `hidden`.
        Error::check(unsafe {
            sys::rmlp_context_pool(
                self.raw.as_ptr(),
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

    /// [`score_pair`](Self::score_pair) on `hidden` in the model's memory (device memory in its
    /// dtype on CUDA); on CUDA it synchronises the context's stream.
    ///
    /// # Safety
    /// As [`pool_device`](Self::pool_device).
    pub unsafe fn score_pair_device(
        &mut self,
        hidden: *const c_void,
        cu_seqlens: &[u32],
        token_a: u32,
        token_b: u32,
    ) -> Result<Vec<PairScore>, Error> {
        let n_tokens = cu_seqlens.last().map_or(0, |&n| n as usize);
        let n_seqs = cu_seqlens.len().saturating_sub(1);
        let (mut logits, mut prob_a) = (vec![0.0f32; 2 * n_seqs], vec![0.0f32; n_seqs]);
        // SAFETY: the output vectors have 2 * n_seqs and n_seqs floats; the caller vouches for `hidden`.
        Error::check(unsafe {
            sys::rmlp_score_pair(
                self.raw.as_ptr(),
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

    /// [`pool_compact`](Self::pool_compact) of `hidden` in the model's memory (device memory in
    /// its dtype on CUDA, after [`set_plan`](Self::set_plan) with the same plan), into host f32;
    /// on CUDA it synchronises the context's stream.
    ///
    /// # Safety
    /// `hidden` must hold the plan's n_compact_padded rows of hidden_size values in the model's
    /// memory and dtype (host f32 on the CPU).
    pub unsafe fn pool_compact_device<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        hidden: *const c_void,
        pooling: Pooling,
        normalize: bool,
    ) -> Result<Vec<f32>, Error> {
        let raw = plan.as_raw()?;
        let mut out = vec![0.0f32; raw.n_seqs as usize * self.model.config.hidden_size];
        // SAFETY: `raw` points into `plan`; `out` has n_seqs rows of hidden_size floats; the
        // caller vouches for `hidden`.
        Error::check(unsafe {
            sys::rmlp_context_pool_compact(self.raw.as_ptr(), &raw, hidden, pooling.raw(), normalize, out.as_mut_ptr())
        })?;
        Ok(out)
    }

    /// [`score_pair_compact`](Self::score_pair_compact) on `hidden` in the model's memory (device
    /// memory in its dtype on CUDA); on CUDA it synchronises the context's stream.
    ///
    /// # Safety
    /// As [`pool_compact_device`](Self::pool_compact_device).
    pub unsafe fn score_pair_compact_device<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        hidden: *const c_void,
        token_a: u32,
        token_b: u32,
    ) -> Result<Vec<PairScore>, Error> {
        let raw = plan.as_raw()?;
        let n_seqs = raw.n_seqs as usize;
        let (mut logits, mut prob_a) = (vec![0.0f32; 2 * n_seqs], vec![0.0f32; n_seqs]);
        // SAFETY: `raw` points into `plan`; the output vectors have 2 * n_seqs and n_seqs floats;
        // the caller vouches for `hidden`.
        Error::check(unsafe {
            sys::rmlp_score_pair_compact(
                self.raw.as_ptr(),
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
    /// hidden_size) receives the last hidden states of every batch row.
    pub fn forward<P: AsPlan + ?Sized>(&mut self, plan: &P, out: &mut [f32]) -> Result<(), Error> {
        self.run_forward("radix_mlp::Context::forward", plan, out, None, false)
    }

    /// [`forward`](Self::forward) with the host's attention, called once per layer in the layout
    /// of the context's [`attention_space`](Self::attention_space) (see [`AttentionArgs`]). An
    /// error it returns, or a panic (caught: status `Internal`), stops the forward; the result
    /// carries the library's message (which layer) followed by the host's. A context with a
    /// prefix cache ([`ContextParams::cache_bytes`]) refuses it (`Status::Unsupported`).
    pub fn forward_with_attention<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        out: &mut [f32],
        attention: &mut dyn FnMut(&mut AttentionArgs<'_>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.run_forward("radix_mlp::Context::forward_with_attention", plan, out, Some(attention), false)
    }

    /// The whole model on one batch in compact space, embedding to final norm on the compact
    /// rows, with the built-in attention (`rmlp_forward_compact`, whatever the context's
    /// setting): `out` (at least n_compact_padded x hidden_size) receives the final-normed compact
    /// rows; batch row `i`'s state is row `scatter[i]`. Read them out with
    /// [`pool_compact`](Self::pool_compact) or [`score_pair_compact`](Self::score_pair_compact).
    pub fn forward_compact<P: AsPlan + ?Sized>(&mut self, plan: &P, out: &mut [f32]) -> Result<(), Error> {
        self.run_forward("radix_mlp::Context::forward_compact", plan, out, None, true)
    }

    /// [`forward_compact`](Self::forward_compact) with the host's attention, which gets the
    /// compact layout ([`AttentionArgs::compact`]); errors and panics as in
    /// [`forward_with_attention`](Self::forward_with_attention).
    pub fn forward_compact_with_attention<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        out: &mut [f32],
        attention: &mut dyn FnMut(&mut AttentionArgs<'_>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.run_forward("radix_mlp::Context::forward_compact_with_attention", plan, out, Some(attention), true)
    }

    /// `rmlp_forward` (`out` batch rows) or `rmlp_forward_compact` (compact rows), with the host's
    /// attention or the built-in one.
    fn run_forward<P: AsPlan + ?Sized>(
        &mut self,
        fn_name: &str,
        plan: &P,
        out: &mut [f32],
        attention: Option<HostAttention<'_>>,
        compact: bool,
    ) -> Result<(), Error> {
        self.host_memory(fn_name)?;
        let raw = self.plan(fn_name, plan)?;
        let rows = if compact { raw.n_compact_padded } else { raw.n_tokens };
        check_len(fn_name, "out", out.len(), rows as usize, self.model.config.hidden_size)?;
        let call = if compact { sys::rmlp_forward_compact } else { sys::rmlp_forward };
        let Some(attention) = attention else {
            // SAFETY: `raw` points into `plan`, borrowed for the call; `out` is long enough.
            return Error::check(unsafe {
                call(self.raw.as_ptr(), &raw, None, core::ptr::null_mut(), out.as_mut_ptr().cast())
            });
        };
        let mut state = Callback { attention, error: None };
        // SAFETY: as above; `state` outlives the call and only the trampoline uses it.
        let code = unsafe {
            call(
                self.raw.as_ptr(),
                &raw,
                Some(trampoline),
                (&mut state as *mut Callback<'_>).cast(),
                out.as_mut_ptr().cast(),
            )
        };
        Error::check(code).map_err(|lib| match state.error.take() {
            Some(host) => Error::new(host.status, format!("{}: {}", lib.message, host.message)),
            None => lib,
        })
    }

    /// Reranker scores (`rmlp_score_pair`, Qwen3-Reranker's yes/no): the LM-head logits of
    /// `token_a` and `token_b` at each sequence's last row of `hidden` (at least n_tokens x
    /// hidden_size, the output of [`forward`](Self::forward) or [`final_norm`](Self::final_norm)).
    pub fn score_pair(
        &mut self,
        hidden: &[f32],
        cu_seqlens: &[u32],
        token_a: u32,
        token_b: u32,
    ) -> Result<Vec<PairScore>, Error> {
        const FN: &str = "radix_mlp::Context::score_pair";
        self.host_memory(FN)?;
        let n_tokens = cu_seqlens.last().map_or(0, |&n| n as usize);
        check_len(FN, "hidden", hidden.len(), n_tokens, self.model.config.hidden_size)?;
        // SAFETY: host memory (checked above) holding n_tokens rows of hidden_size f32.
        unsafe { self.score_pair_device(hidden.as_ptr().cast(), cu_seqlens, token_a, token_b) }
    }

    /// Pools compact rows per sequence (`rmlp_context_pool_compact`): `hidden` (at least
    /// n_compact_padded x hidden_size, the output of [`forward_compact`](Self::forward_compact) or
    /// [`final_norm_compact`](Self::final_norm_compact)) is read per batch row through the plan's
    /// `scatter`, so the result equals [`Model::pool`] of the full output: n_seqs x hidden_size.
    pub fn pool_compact<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        hidden: &[f32],
        pooling: Pooling,
        normalize: bool,
    ) -> Result<Vec<f32>, Error> {
        const FN: &str = "radix_mlp::Context::pool_compact";
        self.compact_rows(FN, plan, hidden)?;
        // SAFETY: host memory (checked above) holding the plan's n_compact_padded rows.
        unsafe { self.pool_compact_device(plan, hidden.as_ptr().cast(), pooling, normalize) }
    }

    /// Reranker scores at each sequence's last row of compact rows (`rmlp_score_pair_compact`):
    /// [`score_pair`](Self::score_pair) of `hidden` (at least n_compact_padded x hidden_size) read
    /// through the plan's `scatter`.
    pub fn score_pair_compact<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        hidden: &[f32],
        token_a: u32,
        token_b: u32,
    ) -> Result<Vec<PairScore>, Error> {
        const FN: &str = "radix_mlp::Context::score_pair_compact";
        self.compact_rows(FN, plan, hidden)?;
        // SAFETY: host memory (checked above) holding the plan's n_compact_padded rows.
        unsafe { self.score_pair_compact_device(plan, hidden.as_ptr().cast(), token_a, token_b) }
    }

    /// Err unless the model is in host memory and `hidden` holds the plan's compact rows.
    fn compact_rows<P: AsPlan + ?Sized>(&self, fn_name: &str, plan: &P, hidden: &[f32]) -> Result<(), Error> {
        self.host_memory(fn_name)?;
        let rows = plan.as_raw()?.n_compact_padded as usize;
        check_len(fn_name, "hidden", hidden.len(), rows, self.model.config.hidden_size)
    }
}

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
