//! The plan builder: [`PlanParams`], the reusable [`Planner`], the borrowed [`PlanView`] of
//! its last plan and the owned [`Plan`], and [`AsPlan`], how the model calls take either.
//! Slice lengths are checked here (the C side cannot see them); everything else is validated
//! by the library.
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ops::Range;
use core::ptr::NonNull;
use std::fmt;

use radix_mlp_sys as sys;

use crate::error::{Error, Status};

/// The rule by which the gate decides between radix and the identity (`rmlp_gate`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Gate {
    /// This library's rule (the default): radix iff `threshold >= 1.0` or
    /// `n_distinct / n_tokens < threshold` (unpadded, in `f64`); `threshold == 0.0` turns it off.
    #[default]
    Distinct,
    /// The rule of text-embeddings-inference's in-tree RadixMLP code, so a host switching from it
    /// changes no decision: in `f32` (TEI's threshold is one), off at `threshold <= 1e-6` (no
    /// trie) and on empty batches, else radix iff `threshold >= 1.0` or the padded compact
    /// length over `n_tokens` is below the threshold.
    Tei,
}

impl Gate {
    fn from_raw(gate: sys::rmlp_gate) -> Gate {
        if gate == sys::RMLP_GATE_TEI {
            Gate::Tei
        } else {
            Gate::Distinct
        }
    }

    fn raw(self) -> sys::rmlp_gate {
        match self {
            Gate::Distinct => sys::RMLP_GATE_DISTINCT,
            Gate::Tei => sys::RMLP_GATE_TEI,
        }
    }
}

/// How a plan is built (the safe form of `rmlp_plan_params`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlanParams {
    /// Gate, with the semantics of TEI's `--radix-mlp-threshold`: radix is used iff
    /// `threshold >= 1.0` or `n_distinct / n_tokens < threshold`; `0.0` turns it off.
    /// Must not be NaN or negative.
    pub threshold: f64,
    /// Pad the compact rows to a multiple of this (at least 1); `None` for no padding.
    pub pad_multiple_of: Option<u32>,
    /// Which rule the gate follows (default [`Gate::Distinct`]; [`Gate::Tei`] decides as TEI's
    /// own code does, on the padded length).
    pub gate: Gate,
}

impl Default for PlanParams {
    /// The library's `rmlp_plan_default_params()`: threshold 0.85, no padding.
    fn default() -> PlanParams {
        // SAFETY: no arguments, returns a value.
        PlanParams::from_raw(&unsafe { sys::rmlp_plan_default_params() })
    }
}

impl PlanParams {
    /// The safe form of params the library made (its defaults, or the environment's).
    fn from_raw(raw: &sys::rmlp_plan_params) -> PlanParams {
        PlanParams {
            threshold: raw.threshold,
            pad_multiple_of: raw.pad.then_some(raw.pad_multiple_of),
            gate: Gate::from_raw(raw.gate),
        }
    }

    /// The switches a deployment sets in the environment, starting from the defaults with
    /// [`Gate::Tei`] (`rmlp_plan_params_from_env`): `RADIX_MLP_THRESHOLD` (the gate, TEI's
    /// `--radix-mlp-threshold`), `RADIX_MLP_PAD` (pad the compact rows to this multiple, 1 to
    /// 4096) and `RADIX_MLP_GATE` (`tei`, the default, since the variables are TEI's and so decide
    /// as TEI's code does; or `distinct`, the [`Gate`]); see docs/deploying.md, "Switches and
    /// metrics". An unset or empty variable keeps the default; a set but invalid one is an error
    /// naming the variable and its value, never a silent default.
    pub fn from_env() -> Result<PlanParams, Error> {
        let mut raw = MaybeUninit::<sys::rmlp_plan_params>::uninit();
        // SAFETY: `raw` is a valid out pointer; the library writes it whatever it returns.
        let code = unsafe { sys::rmlp_plan_params_from_env(raw.as_mut_ptr()) };
        Error::check(code)?;
        // SAFETY: written by rmlp_plan_params_from_env on RMLP_OK.
        Ok(PlanParams::from_raw(&unsafe { raw.assume_init() }))
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
        raw.gate = params.gate.raw();
        raw
    }
}

/// Reusable plan builder (`rmlp_planner`): keeps its scratch and the arrays of its last plan,
/// so steady-state builds allocate nothing.
///
/// `Send` but not `Sync`: use one planner per thread. (The library refuses a planner used by two
/// threads at once with [`Status::Busy`], which `&mut self` already rules out here.)
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
            ("qo_indptr", raw.qo_indptr, raw.n_seqs + 1),
            ("run_indptr", raw.run_indptr, raw.n_seqs + 1),
            ("run_start", raw.run_start, raw.n_runs),
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

    /// (n_seqs + 1) the layout of attention in compact space: sequence `s` owns (is the first to
    /// reach) the compact rows `qo_indptr[s] .. qo_indptr[s+1]`, which are the last rows of its
    /// path; `qo_indptr[n_seqs] == n_compact`. The identity plan's is `cu_seqlens`.
    pub fn qo_indptr(&self) -> &'a [u32] {
        // SAFETY: as in `fold_gather`.
        unsafe { rows(self.raw.qo_indptr, self.raw.n_seqs + 1) }
    }
    /// Runs of consecutive compact rows the sequences' paths are made of (see [`PathRun`]).
    pub fn n_runs(&self) -> usize {
        self.raw.n_runs as usize
    }
    /// (n_seqs + 1) first run of each sequence: sequence `s` is runs `run_indptr[s] .. run_indptr[s+1]`.
    pub fn run_indptr(&self) -> &'a [u32] {
        // SAFETY: as in `fold_gather`.
        unsafe { rows(self.raw.run_indptr, self.raw.n_seqs + 1) }
    }
    /// (n_runs) batch row where each run starts.
    pub fn run_start(&self) -> &'a [u32] {
        // SAFETY: as in `fold_gather`.
        unsafe { rows(self.raw.run_start, self.raw.n_runs) }
    }
    /// The compact rows sequence `s` owns: its queries in compact space (`qo_indptr[s] .. qo_indptr[s+1]`).
    ///
    /// # Panics
    /// When `s >= n_seqs`.
    pub fn owned_rows(&self, s: usize) -> Range<usize> {
        owned_rows(self.qo_indptr(), s)
    }
    /// The path of sequence `s` (its keys in compact space, `scatter[cu_seqlens[s] .. cu_seqlens[s+1]]`)
    /// as runs of consecutive compact rows.
    ///
    /// # Panics
    /// When `s >= n_seqs` (or the plan has no layout, which a built plan always has).
    pub fn path_runs(&self, s: usize) -> impl Iterator<Item = PathRun> + 'a {
        path_runs(self.cu_seqlens(), self.scatter(), self.run_indptr(), self.run_start(), s)
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
            qo_indptr: self.qo_indptr().to_vec(),
            run_indptr: self.run_indptr().to_vec(),
            run_start: self.run_start().to_vec(),
        }
    }
}

impl fmt::Debug for PlanView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.to_owned().fmt(f)
    }
}

/// One run of a sequence's path ([`PlanView::path_runs`]): the batch rows `batch_start ..
/// batch_start + len` read the consecutive compact rows `compact_start .. compact_start + len`.
/// A CPU attention can run one GEMM per run over its keys, with no gather.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathRun {
    pub batch_start: usize,
    pub compact_start: usize,
    pub len: usize,
}

fn owned_rows(qo_indptr: &[u32], s: usize) -> Range<usize> {
    qo_indptr[s] as usize..qo_indptr[s + 1] as usize
}

/// The runs of sequence `s`: run `r` ends where the next starts, the last one at the sequence's end.
fn path_runs<'a>(
    cu_seqlens: &'a [u32],
    scatter: &'a [u32],
    run_indptr: &'a [u32],
    run_start: &'a [u32],
    s: usize,
) -> impl Iterator<Item = PathRun> + 'a {
    let (first, last, end) = (run_indptr[s] as usize, run_indptr[s + 1] as usize, cu_seqlens[s + 1] as usize);
    (first..last).map(move |r| {
        let start = run_start[r] as usize;
        let next = if r + 1 < last { run_start[r + 1] as usize } else { end };
        PathRun { batch_start: start, compact_start: scatter[start] as usize, len: next - start }
    })
}

/// An owned plan: the fields of [`PlanView`], arrays copied into `Vec`s. The layout of compact
/// attention (`qo_indptr`, `run_indptr`, `run_start`) may be left empty in a plan made by hand:
/// the model calls then refuse attention in compact space, as the library does for such a plan.
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
    /// (n_seqs + 1, or empty) see [`PlanView::qo_indptr`].
    pub qo_indptr: Vec<u32>,
    /// (n_seqs + 1, or empty) see [`PlanView::run_indptr`].
    pub run_indptr: Vec<u32>,
    /// (n_runs) see [`PlanView::run_start`].
    pub run_start: Vec<u32>,
}

impl Plan {
    /// See [`PlanView::owned_rows`].
    pub fn owned_rows(&self, s: usize) -> Range<usize> {
        owned_rows(&self.qo_indptr, s)
    }
    /// See [`PlanView::path_runs`].
    pub fn path_runs(&self, s: usize) -> impl Iterator<Item = PathRun> + '_ {
        path_runs(&self.cu_seqlens, &self.scatter, &self.run_indptr, &self.run_start, s)
    }
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
            planner: core::ptr::null(), // the arrays are this Plan's own
            generation: 0,
            qo_indptr: or_null(&self.qo_indptr),
            n_runs: count("n_runs", self.run_start.len())?,
            run_indptr: or_null(&self.run_indptr),
            run_start: or_null(&self.run_start),
        };
        // The layout is optional (NULL when empty), but whole when given.
        let seqs = |len: usize| if len == 0 { 0 } else { self.n_seqs + 1 };
        let rows = self.n_compact_padded;
        for (name, len, want) in [
            ("fold_gather", self.fold_gather.len(), rows),
            ("scatter", self.scatter.len(), self.n_tokens),
            ("compact_input_ids", self.compact_input_ids.len(), rows),
            ("compact_position_ids", self.compact_position_ids.len(), rows),
            ("compact_parent", self.compact_parent.len(), rows),
            ("cu_seqlens", self.cu_seqlens.len(), self.n_seqs + 1),
            ("qo_indptr", self.qo_indptr.len(), seqs(self.qo_indptr.len())),
            ("run_indptr", self.run_indptr.len(), seqs(self.run_indptr.len())),
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

/// The array's pointer, NULL when it is empty (a plan without the compact layout).
fn or_null(v: &[u32]) -> *const u32 {
    if v.is_empty() {
        core::ptr::null()
    } else {
        v.as_ptr()
    }
}
