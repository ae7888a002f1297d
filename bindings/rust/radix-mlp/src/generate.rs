//! Generation on the prefix tree (`rmlp_generate_*`): a [`Generation`] session borrows its
//! [`Context`] mutably from [`Context::generate_begin`] (the prompts prefilled through the
//! context's prefix cache, shared prefixes once) to its drop (`rmlp_generate_end`); each
//! [`Generation::step`] appends one token per active sequence and returns their logits. The host
//! picks the tokens: [`Context::generate`] runs the loop with the host's pick (sampling, EOS,
//! budgets), [`Context::generate_greedy`] with the argmax.
use radix_mlp_sys as sys;

use crate::context::{Context, ModelHolder};
use crate::error::{Error, Status};
use crate::model::Model;
use crate::planner::AsPlan;

/// Options of a generation session (`rmlp_generate_params`): the library's defaults by default
/// (256 new tokens, shared-prefix attention on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenerateParams {
    /// Most rows a sequence may append (sizes the session's state); a step past it for a sequence
    /// is refused (finish the sequence first). [`Context::generate`] makes at most this many
    /// tokens per sequence.
    pub max_new_tokens: u32,
    /// Shared-prefix (cascade) attention: a prefix's keys read once per step for every sequence
    /// below it. False: each sequence attends over its whole path alone (the same up to fp32
    /// rounding; for comparisons).
    pub shared_prefix_attention: bool,
}

impl Default for GenerateParams {
    /// `rmlp_generate_default_params()`.
    fn default() -> GenerateParams {
        // SAFETY: no arguments, returns a value.
        let raw = unsafe { sys::rmlp_generate_default_params() };
        GenerateParams { max_new_tokens: raw.max_new_tokens, shared_prefix_attention: raw.shared_prefix_attention }
    }
}

impl GenerateParams {
    fn raw(&self) -> sys::rmlp_generate_params {
        // SAFETY: no arguments, returns a value (struct_size set).
        let mut raw = unsafe { sys::rmlp_generate_default_params() };
        raw.max_new_tokens = self.max_new_tokens;
        raw.shared_prefix_attention = self.shared_prefix_attention;
        raw
    }
}

/// What a session did since it began (`rmlp_generate_stats`, from [`Generation::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GenerateStats {
    /// Sequences of the session, and of them still active.
    pub n_seqs: u64,
    pub n_active: u64,
    /// Steps run; rows appended (one per active sequence and step); of those, computed (the
    /// others were cached already, or shared with another sequence's row of the same step).
    pub steps: u64,
    pub rows: u64,
    pub rows_computed: u64,
    /// Wall time of the steps, and of their attention, in milliseconds.
    pub step_ms: f64,
    pub attention_ms: f64,
}

/// A generation session on a [`Context`] (one at a time: it borrows the context mutably).
/// Dropping it ends the session (`rmlp_generate_end`): the sequences' rows stay in the prefix
/// cache, unlocked, for later prompts that continue them.
pub struct Generation<'c, 'm, M: ModelHolder = &'m Model> {
    ctx: &'c mut Context<'m, M>,
    vocab: usize,
    n_seqs: usize,
    ended: bool,
}

impl<'m, M: ModelHolder> Context<'m, M> {
    /// Begins a generation session (`rmlp_generate_begin`) on a context with a prefix cache
    /// ([`ContextParams::cache_bytes`](crate::ContextParams::cache_bytes) > 0) of a model with an
    /// LM head: prefills the plan's sequences (every one non-empty) and returns the session and
    /// the logits at each prompt's last token (host memory, n_seqs x vocab_size, row s for
    /// sequence s). Every sequence is then active. On any device no `set_plan` is needed first (on
    /// CUDA begin sets the plan itself). `Status::Unsupported` without a cache or an LM head,
    /// `Status::TooLarge` when the prompts (or a prompt plus `max_new_tokens`) do not fit the
    /// cache.
    pub fn generate_begin<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        params: &GenerateParams,
    ) -> Result<(Generation<'_, 'm, M>, Vec<f32>), Error> {
        let raw = self.plan("radix_mlp::Context::generate_begin", plan)?;
        let vocab = self.model_config().vocab_size;
        let n_seqs = raw.n_seqs as usize;
        let mut logits = vec![0.0f32; n_seqs * vocab];
        let c_params = params.raw();
        // SAFETY: `self` is a live context borrowed mutably; `raw` points into `plan`, borrowed
        // for the call; `logits` has n_seqs x vocab_size floats, what begin writes.
        Error::check(unsafe { sys::rmlp_generate_begin(self.raw_ptr(), &raw, &c_params, logits.as_mut_ptr()) })?;
        Ok((Generation { ctx: self, vocab, n_seqs, ended: false }, logits))
    }

    /// Generates from the plan's prompts in one session: `pick(seq, logits)` chooses sequence
    /// `seq`'s next token from its logits (vocab_size); a sequence finishes at a token of `eos`
    /// (kept in its output) or after `params.max_new_tokens` tokens. Returns each sequence's
    /// generated ids, in plan order. Sampling is the host's: `pick` may draw from the logits.
    pub fn generate<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        params: &GenerateParams,
        eos: &[u32],
        mut pick: impl FnMut(usize, &[f32]) -> u32,
    ) -> Result<Vec<Vec<u32>>, Error> {
        if params.max_new_tokens == 0 {
            return Err(Error::new(
                Status::InvalidArgument,
                "radix_mlp::Context::generate: max_new_tokens=0, must be at least 1".to_owned(),
            ));
        }
        let max_new = params.max_new_tokens as usize;
        let (mut session, mut logits) = self.generate_begin(plan, params)?;
        let vocab = session.vocab;
        let mut out = vec![Vec::new(); session.n_seqs];
        let mut active: Vec<usize> = (0..session.n_seqs).collect();
        let (mut next, mut still) = (Vec::with_capacity(active.len()), Vec::with_capacity(active.len()));
        while !active.is_empty() {
            next.clear();
            still.clear();
            for (i, &s) in active.iter().enumerate() {
                let token = pick(s, &logits[i * vocab..(i + 1) * vocab]);
                out[s].push(token);
                if eos.contains(&token) || out[s].len() >= max_new {
                    session.finish(s)?;
                } else {
                    next.push(token);
                    still.push(s);
                }
            }
            if !next.is_empty() {
                session.step_into(&next, &mut logits)?;
            }
            std::mem::swap(&mut active, &mut still);
        }
        session.end()?;
        Ok(out)
    }

    /// [`generate`](Self::generate) with the argmax of each logits row (the lowest id on ties):
    /// greedy decoding, as transformers' `generate(do_sample=False)`.
    pub fn generate_greedy<P: AsPlan + ?Sized>(
        &mut self,
        plan: &P,
        params: &GenerateParams,
        eos: &[u32],
    ) -> Result<Vec<Vec<u32>>, Error> {
        self.generate(plan, params, eos, |_, logits| argmax(logits))
    }
}

/// The index of the largest value (the first on ties; NaNs never win).
pub fn argmax(values: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] || (values[best].is_nan() && !v.is_nan()) {
            best = i;
        }
    }
    best as u32
}

impl<M: ModelHolder> Generation<'_, '_, M> {
    /// The model's vocabulary size: the width of each logits row.
    pub fn vocab_size(&self) -> usize {
        self.vocab
    }

    /// The number of sequences of the session (the plan's).
    pub fn n_seqs(&self) -> usize {
        self.n_seqs
    }

    /// One decode step (`rmlp_generate_step`): `tokens` holds one id per active sequence in
    /// ascending sequence order ([`active`](Self::active)); returns the logits at each new token
    /// (tokens.len() x vocab_size, in the same order). A wrong count, an id outside the
    /// vocabulary, a sequence past `max_new_tokens` are `Status::InvalidArgument`; a cache too
    /// full for the new rows `Status::OutOfMemory` (nothing changed: finish sequences).
    pub fn step(&mut self, tokens: &[u32]) -> Result<Vec<f32>, Error> {
        let mut logits = vec![0.0f32; tokens.len() * self.vocab];
        self.step_into(tokens, &mut logits)?;
        Ok(logits)
    }

    /// [`step`](Self::step) into `logits` (at least tokens.len() x vocab_size; the rows past
    /// that are left as they are).
    pub fn step_into(&mut self, tokens: &[u32], logits: &mut [f32]) -> Result<(), Error> {
        let need = tokens.len().saturating_mul(self.vocab);
        if logits.len() < need {
            return Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "radix_mlp::Generation::step_into: logits has {} floats, {} tokens x vocab_size {} need {need}",
                    logits.len(),
                    tokens.len(),
                    self.vocab
                ),
            ));
        }
        // SAFETY: the session's context is live and borrowed mutably; `tokens` has tokens.len()
        // ids and `logits` room for tokens.len() rows, the most the step writes (it writes only
        // when tokens.len() equals the active count).
        Error::check(unsafe {
            sys::rmlp_generate_step(self.ctx.raw_ptr(), tokens.as_ptr(), tokens.len(), logits.as_mut_ptr())
        })
    }

    /// Finishes sequence `seq` (`rmlp_generate_finish`; its index in the plan): it leaves the
    /// active set; its rows stay cached. Finishing it twice, or `seq` >= n_seqs, is
    /// `Status::InvalidArgument`.
    pub fn finish(&mut self, seq: usize) -> Result<(), Error> {
        let seq = u32::try_from(seq).map_err(|_| {
            Error::new(Status::InvalidArgument, format!("radix_mlp::Generation::finish: seq={seq} exceeds 2^32-1"))
        })?;
        // SAFETY: the session's context is live and borrowed mutably.
        Error::check(unsafe { sys::rmlp_generate_finish(self.ctx.raw_ptr(), seq) })
    }

    /// The active sequences, ascending (`rmlp_generate_active`).
    pub fn active(&self) -> Result<Vec<u32>, Error> {
        let mut seqs = vec![0u32; self.n_seqs];
        let mut n = 0usize;
        // SAFETY: the session's context is live (this session borrows it mutably, so no other
        // call runs on it); `seqs` has room for n_seqs indices, the most the library writes.
        Error::check(unsafe { sys::rmlp_generate_active(self.ctx.raw_ptr(), seqs.as_mut_ptr(), &mut n) })?;
        seqs.truncate(n);
        Ok(seqs)
    }

    /// The session's counters (`rmlp_generate_get_stats`).
    pub fn stats(&self) -> Result<GenerateStats, Error> {
        let mut s = sys::rmlp_generate_stats::default();
        // SAFETY: the session's context is live; `s` is an out pointer.
        Error::check(unsafe { sys::rmlp_generate_get_stats(self.ctx.raw_ptr(), &mut s) })?;
        Ok(GenerateStats {
            n_seqs: s.n_seqs,
            n_active: s.n_active,
            steps: s.steps,
            rows: s.rows,
            rows_computed: s.rows_computed,
            step_ms: s.step_ms,
            attention_ms: s.attention_ms,
        })
    }

    /// Ends the session (`rmlp_generate_end`), with its status; dropping it does the same.
    pub fn end(mut self) -> Result<(), Error> {
        self.ended = true;
        // SAFETY: the session's context is live and borrowed mutably.
        Error::check(unsafe { sys::rmlp_generate_end(self.ctx.raw_ptr()) })
    }
}

impl<M: ModelHolder> Drop for Generation<'_, '_, M> {
    fn drop(&mut self) {
        if !self.ended {
            // SAFETY: as in `end`; its status (OK unless the context is busy, which `&mut` rules
            // out) has nowhere to go.
            unsafe { sys::rmlp_generate_end(self.ctx.raw_ptr()) };
        }
    }
}

impl<M: ModelHolder> std::fmt::Debug for Generation<'_, '_, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generation").field("n_seqs", &self.n_seqs).field("vocab", &self.vocab).finish()
    }
}
