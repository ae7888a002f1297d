//! The plan builder: [`PlanParams`], the reusable [`Planner`], the borrowed [`PlanView`] of
//! its last plan and the owned [`Plan`], and [`AsPlan`], how the model calls take either.
//! Slice lengths are checked here (the C side cannot see them); everything else is validated
//! by the library.
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr::NonNull;
use std::fmt;

use radix_mlp_sys as sys;

use crate::error::{Error, Status};

/// How a plan is built (the safe form of `rmlp_plan_params`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlanParams {
    /// Gate, with the semantics of TEI's `--radix-mlp-threshold`: radix is used iff
    /// `threshold >= 1.0` or `n_distinct / n_tokens < threshold`; `0.0` turns it off.
    /// Must not be NaN or negative.
    pub threshold: f64,
    /// Pad the compact rows to a multiple of this (at least 1); `None` for no padding.
    pub pad_multiple_of: Option<u32>,
}

impl Default for PlanParams {
    /// The library's `rmlp_plan_default_params()`: threshold 0.85, no padding.
    fn default() -> PlanParams {
        // SAFETY: no arguments, returns a value.
        let raw = unsafe { sys::rmlp_plan_default_params() };
        PlanParams { threshold: raw.threshold, pad_multiple_of: raw.pad.then_some(raw.pad_multiple_of) }
    }
}

impl From<&PlanParams> for sys::rmlp_plan_params {
    fn from(params: &PlanParams) -> sys::rmlp_plan_params {
        // Start from the library's defaults so padding bytes and any unset field are its own.
        // SAFETY: no arguments, returns a value.
        let mut raw = unsafe { sys::rmlp_plan_default_params() };
        raw.struct_size = core::mem::size_of::<sys::rmlp_plan_params>() as u32;
        raw.threshold = params.threshold;
        raw.pad = params.pad_multiple_of.is_some();
        if let Some(multiple) = params.pad_multiple_of {
            raw.pad_multiple_of = multiple;
        }
        raw
    }
}

/// Reusable plan builder (`rmlp_planner`): keeps its scratch and the arrays of its last plan,
/// so steady-state builds allocate nothing.
///
/// `Send` but not `Sync`: use one planner per thread.
///
/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<radix_mlp::Planner>();
/// ```
pub struct Planner {
    raw: NonNull<sys::rmlp_planner>,
}

// SAFETY: a planner is plain heap memory with no thread affinity; it may move between threads
// but must not be used from two at once, which `&mut self` on every call and !Sync ensure.
unsafe impl Send for Planner {}

impl Planner {
    /// Creates a planner (`rmlp_planner_create`).
    pub fn new() -> Result<Planner, Error> {
        let mut raw = core::ptr::null_mut();
        // SAFETY: `raw` is a valid out pointer.
        Error::check(unsafe { sys::rmlp_planner_create(&mut raw) })?;
        NonNull::new(raw)
            .map(|raw| Planner { raw })
            .ok_or_else(|| Error::new(Status::Internal, "rmlp_planner_create returned OK and NULL".into()))
    }

    /// Grows the scratch for batches of up to `n_tokens` tokens in `n_seqs` sequences, padded
    /// to multiples up to `max_pad_multiple`, so that builds of such batches allocate nothing.
    pub fn reserve(&mut self, n_tokens: usize, n_seqs: usize, max_pad_multiple: u32) -> Result<(), Error> {
        // SAFETY: `self.raw` is a live planner used by this thread only.
        Error::check(unsafe { sys::rmlp_planner_reserve(self.raw.as_ptr(), n_tokens, n_seqs, max_pad_multiple) })
    }

    /// Builds the plan of one batch (`rmlp_plan_build`). `cu_seq_lengths` holds
    /// `n_seqs + 1` offsets starting at 0 and ending at `input_ids.len()`; `[0, 0]` is the
    /// empty batch. The view borrows the planner's arrays until the next build.
    pub fn build(
        &mut self,
        input_ids: &[u32],
        position_ids: &[u32],
        cu_seq_lengths: &[u32],
        params: &PlanParams,
    ) -> Result<PlanView<'_>, Error> {
        const FN: &str = "radix_mlp::Planner::build";
        if input_ids.len() != position_ids.len() {
            return Err(Error::new(
                Status::InvalidArgument,
                format!("{FN}: input_ids has {} entries but position_ids has {}", input_ids.len(), position_ids.len()),
            ));
        }
        if cu_seq_lengths.is_empty() {
            return Err(Error::new(
                Status::InvalidSeqlens,
                format!("{FN}: cu_seq_lengths is empty: a batch has at least one sequence (an empty batch is [0, 0])"),
            ));
        }
        let raw_params = sys::rmlp_plan_params::from(params);
        let mut out = MaybeUninit::<sys::rmlp_plan>::uninit();
        // SAFETY: the pointers cover the lengths passed (input_ids and position_ids have
        // `input_ids.len()` entries, cu_seq_lengths `n_seqs + 1`); the library writes `out`.
        let code = unsafe {
            sys::rmlp_plan_build(
                self.raw.as_ptr(),
                input_ids.as_ptr(),
                position_ids.as_ptr(),
                input_ids.len(),
                cu_seq_lengths.as_ptr(),
                cu_seq_lengths.len() - 1,
                &raw_params,
                out.as_mut_ptr(),
            )
        };
        Error::check(code)?;
        // SAFETY: on RMLP_OK the library has written the whole plan.
        let raw = unsafe { out.assume_init() };
        let rows = raw.n_compact_padded;
        for (name, ptr, len) in [
            ("fold_gather", raw.fold_gather, rows),
            ("scatter", raw.scatter, raw.n_tokens),
            ("compact_input_ids", raw.compact_input_ids, rows),
            ("compact_position_ids", raw.compact_position_ids, rows),
            ("compact_parent", raw.compact_parent, rows),
            ("cu_seqlens", raw.cu_seqlens, raw.n_seqs + 1),
        ] {
            if ptr.is_null() && len > 0 {
                return Err(Error::new(
                    Status::Internal,
                    format!("{FN}: rmlp_plan_build gave NULL {name} for {len} rows"),
                ));
            }
        }
        Ok(PlanView { raw, _planner: PhantomData })
    }
}

impl Drop for Planner {
    fn drop(&mut self) {
        // SAFETY: `self.raw` came from rmlp_planner_create and is freed once.
        unsafe { sys::rmlp_planner_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Planner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Planner").field(&self.raw).finish()
    }
}

/// The plan of the last build, borrowing the planner's arrays: the index maps between the
/// batch (`n_tokens` rows) and the compact space (one row per distinct (token, position) path,
/// padded to `n_compact_padded` rows).
pub struct PlanView<'a> {
    raw: sys::rmlp_plan,
    _planner: PhantomData<&'a mut Planner>,
}

/// A slice of `len` entries at `ptr`; empty (never built from NULL) when `len` is 0.
///
/// # Safety
/// When `len > 0`, `ptr` must be non-NULL and point at `len` values that live for `'a`.
unsafe fn rows<'a>(ptr: *const u32, len: u32) -> &'a [u32] {
    if len == 0 || ptr.is_null() {
        &[]
    } else {
        core::slice::from_raw_parts(ptr, len as usize)
    }
}

impl<'a> PlanView<'a> {
    /// N: rows of the batch.
    pub fn n_tokens(&self) -> usize {
        self.raw.n_tokens as usize
    }
    /// B: sequences in the batch.
    pub fn n_seqs(&self) -> usize {
        self.raw.n_seqs as usize
    }
    /// Distinct (token, position) paths (equals `n_tokens` when threshold 0 skipped the trie).
    pub fn n_distinct(&self) -> usize {
        self.raw.n_distinct as usize
    }
    /// N': compact rows used: `n_distinct` with radix, else `n_tokens`.
    pub fn n_compact(&self) -> usize {
        self.raw.n_compact as usize
    }
    /// N' rounded up to the padding multiple: the length of the compact arrays.
    pub fn n_compact_padded(&self) -> usize {
        self.raw.n_compact_padded as usize
    }
    /// Whether the gate chose radix; false means every map is the identity.
    pub fn use_radix(&self) -> bool {
        self.raw.use_radix
    }
    /// `n_distinct / n_tokens` (1.0 for an empty batch).
    pub fn compact_ratio(&self) -> f64 {
        self.raw.compact_ratio
    }
    /// Wall time of the build in microseconds.
    pub fn build_us(&self) -> f64 {
        self.raw.build_us
    }
    /// (n_compact_padded) batch row each compact row is read from (first occurrence); 0 on padding.
    pub fn fold_gather(&self) -> &'a [u32] {
        // SAFETY: checked non-NULL in `build`; the arrays live until the planner's next build,
        // which the `&'a mut Planner` borrow excludes.
        unsafe { rows(self.raw.fold_gather, self.raw.n_compact_padded) }
    }
    /// (n_tokens) compact row each batch row takes its result from; never a padding row.
    pub fn scatter(&self) -> &'a [u32] {
        // SAFETY: as in `fold_gather`.
        unsafe { rows(self.raw.scatter, self.raw.n_tokens) }
    }
    /// (n_compact_padded) token id of each compact row; 0 on padding.
    pub fn compact_input_ids(&self) -> &'a [u32] {
        // SAFETY: as in `fold_gather`.
        unsafe { rows(self.raw.compact_input_ids, self.raw.n_compact_padded) }
    }
    /// (n_compact_padded) position id of each compact row; 0 on padding.
    pub fn compact_position_ids(&self) -> &'a [u32] {
        // SAFETY: as in `fold_gather`.
        unsafe { rows(self.raw.compact_position_ids, self.raw.n_compact_padded) }
    }
    /// (n_compact_padded) compact row of the previous token of the path, or
    /// [`NO_PARENT`](crate::NO_PARENT) for path starts and padding.
    pub fn compact_parent(&self) -> &'a [u32] {
        // SAFETY: as in `fold_gather`.
        unsafe { rows(self.raw.compact_parent, self.raw.n_compact_padded) }
    }

    /// (n_seqs + 1) the batch's cu_seqlens, as the plan keeps them for the model calls.
    pub fn cu_seqlens(&self) -> &'a [u32] {
        // SAFETY: as in `fold_gather`.
        unsafe { rows(self.raw.cu_seqlens, self.raw.n_seqs + 1) }
    }

    /// Copies the plan out of the planner.
    pub fn to_owned(&self) -> Plan {
        Plan {
            n_tokens: self.n_tokens(),
            n_seqs: self.n_seqs(),
            n_distinct: self.n_distinct(),
            n_compact: self.n_compact(),
            n_compact_padded: self.n_compact_padded(),
            use_radix: self.use_radix(),
            compact_ratio: self.compact_ratio(),
            build_us: self.build_us(),
            fold_gather: self.fold_gather().to_vec(),
            scatter: self.scatter().to_vec(),
            compact_input_ids: self.compact_input_ids().to_vec(),
            compact_position_ids: self.compact_position_ids().to_vec(),
            compact_parent: self.compact_parent().to_vec(),
            cu_seqlens: self.cu_seqlens().to_vec(),
        }
    }
}

impl fmt::Debug for PlanView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.to_owned().fmt(f)
    }
}

/// An owned plan: the fields of [`PlanView`], arrays copied into `Vec`s.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub n_tokens: usize,
    pub n_seqs: usize,
    pub n_distinct: usize,
    pub n_compact: usize,
    pub n_compact_padded: usize,
    pub use_radix: bool,
    pub compact_ratio: f64,
    pub build_us: f64,
    pub fold_gather: Vec<u32>,
    pub scatter: Vec<u32>,
    pub compact_input_ids: Vec<u32>,
    pub compact_position_ids: Vec<u32>,
    pub compact_parent: Vec<u32>,
    pub cu_seqlens: Vec<u32>,
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::PlanView<'_> {}
    impl Sealed for super::Plan {}
}

/// A plan the model calls take: a [`PlanView`] (the planner's arrays, no copy) or an owned
/// [`Plan`] (for example built on another thread), whose array lengths are checked against its
/// counts. The library checks the rest (counts, `cu_seqlens`, every index in range).
pub trait AsPlan: sealed::Sealed {
    /// The C plan, pointing into `self`: valid while `self` is borrowed.
    #[doc(hidden)]
    fn as_raw(&self) -> Result<sys::rmlp_plan, Error>;
}

impl AsPlan for PlanView<'_> {
    fn as_raw(&self) -> Result<sys::rmlp_plan, Error> {
        Ok(self.raw)
    }
}

impl AsPlan for Plan {
    fn as_raw(&self) -> Result<sys::rmlp_plan, Error> {
        const FN: &str = "radix_mlp::Plan";
        let count = |name: &str, n: usize| {
            u32::try_from(n).map_err(|_| Error::new(Status::TooLarge, format!("{FN}: {name}={n} exceeds 2^32-1")))
        };
        let raw = sys::rmlp_plan {
            n_tokens: count("n_tokens", self.n_tokens)?,
            n_seqs: count("n_seqs", self.n_seqs)?,
            n_distinct: count("n_distinct", self.n_distinct)?,
            n_compact: count("n_compact", self.n_compact)?,
            n_compact_padded: count("n_compact_padded", self.n_compact_padded)?,
            use_radix: self.use_radix,
            compact_ratio: self.compact_ratio,
            build_us: self.build_us,
            fold_gather: self.fold_gather.as_ptr(),
            scatter: self.scatter.as_ptr(),
            compact_input_ids: self.compact_input_ids.as_ptr(),
            compact_position_ids: self.compact_position_ids.as_ptr(),
            compact_parent: self.compact_parent.as_ptr(),
            cu_seqlens: self.cu_seqlens.as_ptr(),
        };
        let rows = self.n_compact_padded;
        for (name, len, want) in [
            ("fold_gather", self.fold_gather.len(), rows),
            ("scatter", self.scatter.len(), self.n_tokens),
            ("compact_input_ids", self.compact_input_ids.len(), rows),
            ("compact_position_ids", self.compact_position_ids.len(), rows),
            ("compact_parent", self.compact_parent.len(), rows),
            ("cu_seqlens", self.cu_seqlens.len(), self.n_seqs + 1),
        ] {
            if len != want {
                return Err(Error::new(
                    Status::InvalidArgument,
                    format!("{FN}: {name} has {len} entries but the plan's counts say {want}"),
                ));
            }
        }
        Ok(raw)
    }
}
