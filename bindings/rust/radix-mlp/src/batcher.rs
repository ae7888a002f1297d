//! The batcher and the routing key (docs/batching.md, docs/deploying-routing.md): a [`Batcher`]
//! queues requests (one sequence of token ids each, with the host's id and arrival time) and hands
//! out [`Batch`]es that share the deepest prefixes first under a budget of tokens and sequences,
//! oldest first once a request has waited [`BatcherParams::max_wait_us`]; [`route_key`] gives the
//! 64-bit key of a request's leading prefix that a load balancer hashes to keep a prefix on one
//! replica, [`route_key_header`] its header value.
use core::marker::PhantomData;
use core::ptr::NonNull;

use radix_mlp_sys as sys;

use crate::context::{Context, ModelHolder};
use crate::error::{Error, Status};

/// How [`Batcher::next_batch`] picks a batch (`rmlp_batch_mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BatchMode {
    /// Aged requests first, then the passed over, groups by the deepest shared prefix, the oldest;
    /// with a cache, by age (see [`Batcher::next_batch_with_cache`]).
    #[default]
    Prefix,
    /// First in, first out, up to the first request that does not fit (a plain queue).
    Fifo,
}

/// How a batcher is made (the safe form of `rmlp_batcher_params`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatcherParams {
    pub mode: BatchMode,
    /// Capacity: requests queued at once (at least 1); a push past it is [`Status::Full`].
    pub max_requests: u32,
    /// Capacity: token ids queued at once, all requests together (at least 1).
    pub max_queued_tokens: u32,
    /// Age bound of prefix batching in microseconds of the host's clock (`u64::MAX`: none).
    pub max_wait_us: u64,
}

impl Default for BatcherParams {
    /// The library's `rmlp_batcher_default_params()`: prefix mode, 4096 requests, 2^20 tokens,
    /// 100 ms.
    fn default() -> BatcherParams {
        // SAFETY: no arguments, returns a value.
        let raw = unsafe { sys::rmlp_batcher_default_params() };
        BatcherParams {
            mode: if raw.mode == sys::RMLP_BATCH_FIFO { BatchMode::Fifo } else { BatchMode::Prefix },
            max_requests: raw.max_requests,
            max_queued_tokens: raw.max_queued_tokens,
            max_wait_us: raw.max_wait_us,
        }
    }
}

/// A queue of pending requests (`rmlp_batcher`); its storage is allocated at creation, so pushing
/// and taking batches allocate nothing.
///
/// `Send` but not `Sync`: a host's batching thread owns it (`&mut self` on every call).
///
/// ```
/// use radix_mlp::{Batcher, BatcherParams};
///
/// let mut batcher = Batcher::new(&BatcherParams::default())?;
/// batcher.push(1, &[7, 8, 9, 1], 0)?; // query A, passage 1
/// batcher.push(2, &[5, 5, 5], 0)?; // something else
/// batcher.push(3, &[7, 8, 9, 2], 0)?; // query A, passage 2
/// let batch = batcher.next_batch(8, 16, 10)?; // room for two of them
/// assert_eq!(batch.ids(), [1, 3]); // the two sharing [7, 8, 9]
/// assert_eq!(batch.shared_tokens(), 3);
/// # Ok::<(), radix_mlp::Error>(())
/// ```
pub struct Batcher {
    raw: NonNull<sys::rmlp_batcher>,
}

// SAFETY: a batcher is heap memory with no thread affinity; `&mut self` on every call and !Sync
// keep it to one thread at a time.
unsafe impl Send for Batcher {}

impl Batcher {
    /// Creates a batcher (`rmlp_batcher_create`).
    pub fn new(params: &BatcherParams) -> Result<Batcher, Error> {
        // SAFETY: no arguments, returns a value.
        let mut raw_params = unsafe { sys::rmlp_batcher_default_params() };
        raw_params.mode = match params.mode {
            BatchMode::Prefix => sys::RMLP_BATCH_PREFIX,
            BatchMode::Fifo => sys::RMLP_BATCH_FIFO,
        };
        raw_params.max_requests = params.max_requests;
        raw_params.max_queued_tokens = params.max_queued_tokens;
        raw_params.max_wait_us = params.max_wait_us;
        let mut raw = core::ptr::null_mut();
        // SAFETY: valid params and out pointer.
        Error::check(unsafe { sys::rmlp_batcher_create(&raw_params, &mut raw) })?;
        NonNull::new(raw)
            .map(|raw| Batcher { raw })
            .ok_or_else(|| Error::new(Status::Internal, "rmlp_batcher_create returned OK and NULL".into()))
    }

    /// Queues a request (its tokens are copied): [`Status::InvalidArgument`] for an id already
    /// queued or no tokens, [`Status::TooLarge`] for more tokens than the queue holds,
    /// [`Status::Full`] when the queue is at its capacity; the queue is then unchanged.
    pub fn push(&mut self, id: u64, tokens: &[u32], arrival_us: u64) -> Result<(), Error> {
        // SAFETY: a live batcher; `tokens` is read for its length only.
        Error::check(unsafe {
            sys::rmlp_batcher_push(self.raw.as_ptr(), id, tokens.as_ptr(), tokens.len(), arrival_us)
        })
    }

    /// Takes a queued request out unbatched (`rmlp_batcher_remove`).
    pub fn remove(&mut self, id: u64) -> Result<(), Error> {
        // SAFETY: a live batcher.
        Error::check(unsafe { sys::rmlp_batcher_remove(self.raw.as_ptr(), id) })
    }

    /// The requests and token ids queued now.
    pub fn pending(&mut self) -> Result<(usize, usize), Error> {
        let (mut requests, mut tokens) = (0usize, 0usize);
        // SAFETY: a live batcher and two out pointers.
        Error::check(unsafe { sys::rmlp_batcher_pending(self.raw.as_ptr(), &mut requests, &mut tokens) })?;
        Ok((requests, tokens))
    }

    /// The next batch of at most `max_tokens` tokens in `max_seqs` requests at time `now_us`
    /// (`rmlp_batcher_next`); its requests leave the queue. Empty when the queue is.
    pub fn next_batch(&mut self, max_tokens: usize, max_seqs: usize, now_us: u64) -> Result<Batch<'_>, Error> {
        // SAFETY: `take` passes a live batcher and an out pointer.
        self.take(None, |raw, out| unsafe { sys::rmlp_batcher_next(raw, max_tokens, max_seqs, now_us, out) })
    }

    /// [`next_batch`](Self::next_batch) with a second budget (`rmlp_batcher_next_rows`): the
    /// batch's compact rows, N' = `n_tokens - shared_tokens` (the rows the planner computes once
    /// per distinct prefix path, [`Batch::shared_tokens`]), stay at most `max_rows` (at least 1;
    /// 0 is [`Status::InvalidArgument`]).
    ///
    /// A RadixMLP forward's compute and its compact activations scale with N', its token arrays
    /// with N: bound a batch's cost with `max_rows` and its full-layout memory with `max_tokens`
    /// (at most the context's `max_tokens`). Prefix batching then fits more requests under a
    /// shared prefix in one batch. Every mode keeps both budgets; a request longer than either
    /// goes alone ([`Batch::oversized`]) when nothing else fits. `max_rows >= max_tokens` is
    /// [`next_batch`](Self::next_batch).
    ///
    /// ```
    /// use radix_mlp::{Batcher, BatcherParams};
    ///
    /// let mut batcher = Batcher::new(&BatcherParams::default())?;
    /// batcher.push(1, &[7, 8, 9, 1], 0)?;
    /// batcher.push(2, &[7, 8, 9, 2], 0)?;
    /// let batch = batcher.next_batch_rows(64, 5, 16, 10)?; // 8 tokens, 4 + 1 rows
    /// assert_eq!(batch.ids(), [1, 2]);
    /// assert_eq!(batch.input_ids().len() - batch.shared_tokens(), 5);
    /// # Ok::<(), radix_mlp::Error>(())
    /// ```
    pub fn next_batch_rows(
        &mut self,
        max_tokens: usize,
        max_rows: usize,
        max_seqs: usize,
        now_us: u64,
    ) -> Result<Batch<'_>, Error> {
        // SAFETY: `take` passes a live batcher and an out pointer.
        self.take(None, |raw, out| unsafe {
            sys::rmlp_batcher_next_rows(raw, max_tokens, max_rows, max_seqs, now_us, out)
        })
    }

    /// [`next_batch`](Self::next_batch) reading `context`'s prefix cache
    /// ([`ContextParams::cache_bytes`](crate::ContextParams::cache_bytes) must be set): the oldest
    /// first, each that fits, and among requests arriving together those whose prefix the cache
    /// holds (or deeper shared) first; the context is attached for this call only
    /// (`rmlp_batcher_attach_context`).
    pub fn next_batch_with_cache<M: ModelHolder>(
        &mut self,
        context: &mut Context<'_, M>,
        max_tokens: usize,
        max_seqs: usize,
        now_us: u64,
    ) -> Result<Batch<'_>, Error> {
        // SAFETY: `take` passes a live batcher and an out pointer; the context stays borrowed.
        self.take(Some(context.raw_mut()), |raw, out| unsafe {
            sys::rmlp_batcher_next(raw, max_tokens, max_seqs, now_us, out)
        })
    }

    /// [`next_batch_rows`](Self::next_batch_rows) reading `context`'s prefix cache, as
    /// [`next_batch_with_cache`](Self::next_batch_with_cache) does: both budgets kept, the context
    /// attached for this call only.
    pub fn next_batch_rows_with_cache<M: ModelHolder>(
        &mut self,
        context: &mut Context<'_, M>,
        max_tokens: usize,
        max_rows: usize,
        max_seqs: usize,
        now_us: u64,
    ) -> Result<Batch<'_>, Error> {
        // SAFETY: `take` passes a live batcher and an out pointer; the context stays borrowed.
        self.take(Some(context.raw_mut()), |raw, out| unsafe {
            sys::rmlp_batcher_next_rows(raw, max_tokens, max_rows, max_seqs, now_us, out)
        })
    }

    /// The batch `next` writes: `next` is `rmlp_batcher_next` or `rmlp_batcher_next_rows` on the
    /// live batcher and out pointer it is given, called once, with `context` (a live context the
    /// caller borrows mutably for the whole call) attached for that call only.
    fn take(
        &mut self,
        context: Option<*mut sys::rmlp_context>,
        next: impl FnOnce(*mut sys::rmlp_batcher, *mut sys::rmlp_batch) -> sys::rmlp_status,
    ) -> Result<Batch<'_>, Error> {
        let batcher = self.raw.as_ptr();
        if let Some(context) = context {
            // SAFETY: both handles live; the context is detached before this returns, so the
            // batcher never holds it past the caller's borrow.
            Error::check(unsafe { sys::rmlp_batcher_attach_context(batcher, context) })?;
        }
        let mut raw = core::mem::MaybeUninit::<sys::rmlp_batch>::zeroed();
        // The arrays the call sets belong to the batcher and live until its next batch or drop,
        // which the borrow of `self` in `Batch` outlasts.
        let result = Error::check(next(batcher, raw.as_mut_ptr()));
        if context.is_some() {
            // SAFETY: a live batcher; detaching cannot fail on it.
            unsafe { sys::rmlp_batcher_attach_context(batcher, core::ptr::null_mut()) };
        }
        result?;
        // SAFETY: written by rmlp_batcher_next(_rows) on RMLP_OK.
        Ok(Batch { raw: unsafe { raw.assume_init() }, _batcher: PhantomData })
    }
}

impl Drop for Batcher {
    fn drop(&mut self) {
        // SAFETY: the handle is live and dropped once.
        unsafe { sys::rmlp_batcher_free(self.raw.as_ptr()) }
    }
}

/// A batch from [`Batcher::next_batch`] (or its kin), borrowing the batcher's arrays: its requests in the
/// order to answer them, laid out as [`Planner::build`](crate::Planner::build) takes a batch.
pub struct Batch<'a> {
    raw: sys::rmlp_batch,
    _batcher: PhantomData<&'a mut Batcher>,
}

/// A slice of n elements at ptr (an empty one for NULL or 0).
///
/// # Safety
/// `ptr` must point to n live elements for 'a when n > 0.
unsafe fn slice<'a, T>(ptr: *const T, n: usize) -> &'a [T] {
    if ptr.is_null() || n == 0 {
        &[]
    } else {
        core::slice::from_raw_parts(ptr, n)
    }
}

impl Batch<'_> {
    /// The requests' ids, in order.
    pub fn ids(&self) -> &[u64] {
        // SAFETY: n_seqs ids in the batcher's arrays, live while the batcher is borrowed.
        unsafe { slice(self.raw.ids, self.raw.n_seqs as usize) }
    }
    /// Their arrival times, as pushed.
    pub fn arrival_us(&self) -> &[u64] {
        // SAFETY: as for ids.
        unsafe { slice(self.raw.arrival_us, self.raw.n_seqs as usize) }
    }
    /// The token ids back to back (N).
    pub fn input_ids(&self) -> &[u32] {
        // SAFETY: n_tokens ids, as for ids.
        unsafe { slice(self.raw.input_ids, self.raw.n_tokens as usize) }
    }
    /// Positions, 0.. within each request.
    pub fn position_ids(&self) -> &[u32] {
        // SAFETY: as for input_ids.
        unsafe { slice(self.raw.position_ids, self.raw.n_tokens as usize) }
    }
    /// (n_seqs + 1) offsets of the requests in [`input_ids`](Self::input_ids).
    pub fn cu_seqlens(&self) -> &[u32] {
        // SAFETY: n_seqs + 1 offsets, as for ids.
        unsafe { slice(self.raw.cu_seqlens, self.raw.n_seqs as usize + 1) }
    }
    /// Request `i`'s tokens.
    pub fn tokens(&self, i: usize) -> &[u32] {
        let cu = self.cu_seqlens();
        &self.input_ids()[cu[i] as usize..cu[i + 1] as usize]
    }
    pub fn len(&self) -> usize {
        self.raw.n_seqs as usize
    }
    pub fn is_empty(&self) -> bool {
        self.raw.n_seqs == 0
    }
    /// One request longer than a budget (tokens or rows), alone.
    pub fn oversized(&self) -> bool {
        self.raw.flags & sys::RMLP_BATCH_OVERSIZED != 0
    }
    /// Requests that had waited `max_wait_us` or longer (taken first).
    pub fn n_aged(&self) -> usize {
        self.raw.n_aged as usize
    }
    /// The attached context was busy on another thread: chosen without its cache.
    pub fn cache_skipped(&self) -> bool {
        self.raw.flags & sys::RMLP_BATCH_CACHE_SKIPPED != 0
    }
    /// Tokens repeating a path of an earlier request in the batch (N minus the planner's N', the
    /// rows [`Batcher::next_batch_rows`] budgets).
    pub fn shared_tokens(&self) -> usize {
        self.raw.shared_tokens as usize
    }
    /// Distinct paths the attached context's cache held when the batch was chosen.
    pub fn cached_tokens(&self) -> usize {
        self.raw.cached_tokens as usize
    }
}

impl<M: ModelHolder> Context<'_, M> {
    /// How many leading tokens of `tokens` (positions 0..) the prefix cache holds now
    /// (`rmlp_context_cached_prefix`; 0 without a cache). Changes nothing.
    pub fn cached_prefix(&mut self, tokens: &[u32]) -> Result<usize, Error> {
        let mut n = 0usize;
        // SAFETY: a live context borrowed mutably; `tokens` read for its length; an out pointer.
        Error::check(unsafe {
            sys::rmlp_context_cached_prefix(self.raw_mut(), tokens.as_ptr(), tokens.len(), &mut n)
        })?;
        Ok(n)
    }
}

/// Which leading tokens a routing key covers (the safe form of `rmlp_route_params`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteParams {
    /// At most this many leading tokens (at least 1; default 64).
    pub prefix_tokens: u32,
    /// Up to and including the first of this token among them (a query's or instruction's end).
    pub separator: Option<u32>,
}

impl Default for RouteParams {
    fn default() -> RouteParams {
        RouteParams { prefix_tokens: sys::RMLP_ROUTE_DEFAULT_PREFIX_TOKENS, separator: None }
    }
}

/// The routing key of a request and how many tokens it covers (`rmlp_route_key`): FNV-1a 64 over
/// the covered ids' little-endian bytes, then fmix64; the same in every process and platform.
pub fn route_key(tokens: &[u32], params: &RouteParams) -> Result<(u64, usize), Error> {
    // SAFETY: no arguments, returns a value.
    let mut raw = unsafe { sys::rmlp_route_default_params() };
    raw.prefix_tokens = params.prefix_tokens;
    raw.use_separator = params.separator.is_some();
    raw.separator = params.separator.unwrap_or(0);
    let (mut key, mut covered) = (0u64, 0usize);
    // SAFETY: `tokens` read for its length; valid params and out pointers.
    Error::check(unsafe { sys::rmlp_route_key(tokens.as_ptr(), tokens.len(), &raw, &mut key, &mut covered) })?;
    Ok((key, covered))
}

/// `key` as the header value a balancer hashes: 16 lowercase hex digits (`rmlp_route_key_format`).
pub fn route_key_header(key: u64) -> String {
    let mut text = [0 as core::ffi::c_char; sys::RMLP_ROUTE_KEY_CHARS];
    // SAFETY: a buffer of RMLP_ROUTE_KEY_CHARS bytes, which always suffices.
    let code = unsafe { sys::rmlp_route_key_format(key, text.as_mut_ptr(), text.len()) };
    debug_assert_eq!(code, sys::RMLP_OK);
    text[..16].iter().map(|&c| c as u8 as char).collect()
}
