//! The backend thread's jobs (one per request): what each has left to run and its outputs so far,
//! and the accounting that keeps the queue's figures live: a job whose client has gone is refused
//! before it is queued and dropped while it waits (its sequences leave the batcher unrun); the
//! queue limit (429, `--max-queued-tokens`) counts live jobs' tokens not yet in a batch only.
//! Sequences enter the batcher in turns (fairness.rs), one batch's budget at a time.
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use radix_mlp::{Batcher, Status};

use crate::errors::{ApiError, ErrorKind};
use crate::fairness::{Room, Turns};
use crate::forward::BatchOutput;
use crate::queue::{Job, JobOutput, Reply, SeqOutput, Task, Waiting, SEQ_INDEX_BITS};

const INDEX_MASK: u64 = (1 << SEQ_INDEX_BITS) - 1;

/// A job being served.
struct Pending {
    task: Task,
    outputs: Vec<Option<SeqOutput>>,
    /// Sequences without an output yet.
    remaining: usize,
    /// Sequences not in the batcher yet (index, ids), in order.
    unpushed: VecDeque<(usize, Vec<u32>)>,
    /// Tokens of its sequences not taken into a batch yet.
    queued_tokens: usize,
    reply: tokio::sync::oneshot::Sender<Reply>,
    waiting: Arc<Waiting>,
    arrival_us: u64,
    sent_at: Instant,
    first_batch: Option<Instant>,
    inference: Duration,
    /// The last batch whose time `inference` counts.
    last_batch: u64,
}

#[derive(Default)]
pub struct Jobs {
    map: HashMap<u64, Pending>,
    turns: Turns,
    next_key: u64,
    /// Tokens of live jobs not taken into a batch yet (in the batcher or still to enter it).
    queued_tokens: usize,
}

impl Jobs {
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The task of the job a batcher id belongs to.
    pub fn task_of(&self, id: u64) -> Option<Task> {
        self.map.get(&(id >> SEQ_INDEX_BITS)).map(|j| j.task)
    }

    /// When the oldest job with a sequence in `ids` was sent by its route.
    pub fn oldest_sent(&self, ids: &[u64]) -> Option<Instant> {
        ids.iter().filter_map(|id| self.map.get(&(id >> SEQ_INDEX_BITS))).map(|j| j.sent_at).min()
    }

    /// Takes a job in, or answers it with why not (its client gone: dropped unanswered).
    pub fn accept(&mut self, job: Job, now_us: u64, max_queued_tokens: usize) {
        if job.reply.is_closed() {
            return; // the client went away while the job was on its way: never queued
        }
        let lengths: Vec<usize> = job.sequences.iter().map(Vec::len).collect();
        let tokens: usize = lengths.iter().sum();
        let refused = if let Some(&n) = lengths.iter().find(|&&n| n > max_queued_tokens) {
            Some(ApiError::too_large(format!(
                "a sequence of {n} tokens is more than --max-queued-tokens {max_queued_tokens}"
            )))
        } else if self.queued_tokens + tokens > max_queued_tokens {
            Some(ApiError::overloaded(format!(
                "the batch queue is full: {} tokens of live requests wait, {tokens} more would pass --max-queued-tokens \
                 {max_queued_tokens}",
                self.queued_tokens
            )))
        } else {
            None
        };
        if let Some(e) = refused {
            job.waiting.leave_all();
            let _ = job.reply.send(Err(e));
            return;
        }
        let key = self.next_key;
        self.next_key += 1;
        let n = job.sequences.len();
        self.queued_tokens += tokens;
        self.turns.add(key);
        let pending = Pending {
            task: job.task,
            outputs: vec![None; n],
            remaining: n,
            unpushed: job.sequences.into_iter().enumerate().collect(),
            queued_tokens: tokens,
            reply: job.reply,
            waiting: job.waiting,
            arrival_us: now_us,
            sent_at: job.sent_at,
            first_batch: None,
            inference: Duration::ZERO,
            last_batch: u64::MAX,
        };
        self.map.insert(key, pending);
    }

    /// Forgets a job: its sequences in the batcher leave it unrun; its queue counts drop.
    fn forget(&mut self, key: u64, batcher: &mut Batcher) -> Option<Pending> {
        let job = self.map.remove(&key)?;
        self.turns.remove(key);
        let unpushed: Vec<usize> = job.unpushed.iter().map(|(i, _)| *i).collect();
        for (i, _) in job.outputs.iter().enumerate().filter(|(i, o)| o.is_none() && !unpushed.contains(i)) {
            let _ = batcher.remove(key << SEQ_INDEX_BITS | i as u64); // not found: in the batch that ran
        }
        self.queued_tokens -= job.queued_tokens;
        job.waiting.leave_all();
        Some(job)
    }

    /// Drops the jobs whose client went away (the route's future was dropped).
    pub fn drop_abandoned(&mut self, batcher: &mut Batcher) {
        let gone: Vec<u64> = self.map.iter().filter(|(_, j)| j.reply.is_closed()).map(|(&k, _)| k).collect();
        for key in gone {
            self.forget(key, batcher);
        }
    }

    /// Answers every job with a sequence in `ids` with `error` and forgets it.
    pub fn fail(&mut self, ids: &[u64], error: &ApiError, batcher: &mut Batcher) {
        for id in ids {
            if let Some(job) = self.forget(id >> SEQ_INDEX_BITS, batcher) {
                let _ = job.reply.send(Err(error.clone()));
            }
        }
    }

    /// Moves sequences into the batcher, in turns, until it holds `max_tokens` tokens and
    /// `max_seqs` sequences (fairness.rs).
    pub fn fill(&mut self, batcher: &mut Batcher, max_tokens: usize, max_seqs: usize) {
        let (seqs, tokens) = match batcher.pending() {
            Ok(p) => p,
            Err(e) => return eprintln!("tei-host: the batcher failed: {e}"),
        };
        let room = Room {
            tokens: max_tokens.saturating_sub(tokens),
            sequences: max_seqs.saturating_sub(seqs),
            batcher_empty: seqs == 0,
        };
        let map = std::cell::RefCell::new(&mut self.map);
        let mut failed = Vec::new();
        self.turns.fill(
            room,
            |key| map.borrow().get(&key)?.unpushed.front().map(|(_, s)| s.len()),
            |key| {
                let mut map = map.borrow_mut();
                let job = map.get_mut(&key).expect("a job with a turn");
                let (i, seq) = job.unpushed.pop_front().expect("a sequence left");
                if let Err(e) = batcher.push(key << SEQ_INDEX_BITS | i as u64, &seq, job.arrival_us) {
                    let kind = if e.status == Status::Full { ErrorKind::Overloaded } else { ErrorKind::Backend };
                    failed.push((key, ApiError::new(kind, format!("the batcher refused a sequence: {e}"))));
                }
            },
        );
        for (key, error) in failed {
            if let Some(job) = self.forget(key, batcher) {
                let _ = job.reply.send(Err(error));
            }
        }
    }

    /// A batch took the sequences `ids` (of `lengths` tokens): they no longer wait.
    pub fn taken(&mut self, ids: &[u64], lengths: impl Iterator<Item = usize>) {
        for (id, n) in ids.iter().zip(lengths) {
            if let Some(job) = self.map.get_mut(&(id >> SEQ_INDEX_BITS)) {
                job.queued_tokens -= n;
                self.queued_tokens -= n;
                job.waiting.leave(1);
            }
        }
    }

    /// Hands each sequence of batch `batch_no` (`ids`) its output and answers the jobs that are
    /// complete.
    pub fn deliver(&mut self, ids: &[u64], out: &BatchOutput, batch_no: u64, start: Instant, took: Duration) {
        let n_seqs = ids.len();
        let h = if n_seqs > 0 { out.pooled.len() / n_seqs } else { 0 };
        for (s, &id) in ids.iter().enumerate() {
            let key = id >> SEQ_INDEX_BITS;
            let Some(job) = self.map.get_mut(&key) else { continue };
            let output = match job.task {
                Task::Embed => SeqOutput::Embedding(out.pooled[s * h..(s + 1) * h].to_vec()),
                Task::Score(..) => SeqOutput::Score(out.scores[s]),
            };
            job.outputs[(id & INDEX_MASK) as usize] = Some(output);
            job.remaining -= 1;
            job.first_batch.get_or_insert(start);
            if job.last_batch != batch_no {
                job.last_batch = batch_no;
                job.inference += took;
            }
            if job.remaining == 0 {
                let job = self.map.remove(&key).expect("present");
                self.turns.remove(key);
                let queue = job.first_batch.map_or(Duration::ZERO, |t| t.saturating_duration_since(job.sent_at));
                let outputs = job.outputs.into_iter().map(|o| o.expect("every sequence ran")).collect();
                let _ = job.reply.send(Ok(JobOutput { outputs, queue, inference: job.inference }));
            }
        }
    }
}
