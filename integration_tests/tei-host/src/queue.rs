//! The queue between the routes and the backend thread, as in TEI: a route admits a request (a
//! permit of `--max-concurrent-requests`, else 429), sends its validated sequences as one [`Job`]
//! over a channel, and awaits the answer; the backend thread pushes each sequence into the library's
//! batcher and answers the job when its last sequence has run. A client that goes away drops the
//! answer's receiver, and the backend takes its sequences out of the batcher unrun. `te_queue_size`
//! counts the sequences of live requests that wait: from the send until they enter a batch, are
//! dropped, or their client goes away, whichever comes first ([`Waiting`]).
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus::IntGauge;
use radix_mlp::PairScore;
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

use crate::errors::{ApiError, ErrorKind};

/// Bits of a batcher request id that hold the sequence's index in its job (the rest: the job).
pub const SEQ_INDEX_BITS: u32 = 24;

/// What the backend computes for a job's sequences.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Task {
    /// Pooled last hidden states (not normalized).
    Embed,
    /// The reranking score of the pair of token ids.
    Score(u32, u32),
}

/// One sequence's result.
#[derive(Clone, Debug, PartialEq)]
pub enum SeqOutput {
    Embedding(Vec<f32>),
    Score(PairScore),
}

/// A job's answer and how long it took where.
#[derive(Debug)]
pub struct JobOutput {
    pub outputs: Vec<SeqOutput>,
    /// From the job's arrival at the backend to its first batch.
    pub queue: Duration,
    /// The forwards of the batches its sequences ran in.
    pub inference: Duration,
}

pub type Reply = Result<JobOutput, ApiError>;

/// A request's sequences that wait, counted in the queue's gauge until they leave it.
pub struct Waiting {
    left: AtomicUsize,
    gauge: IntGauge,
}

impl Waiting {
    fn new(n: usize, gauge: IntGauge) -> Waiting {
        gauge.add(n as i64);
        Waiting { left: AtomicUsize::new(n), gauge }
    }

    /// `n` of them no longer wait (at most those left).
    pub fn leave(&self, n: usize) {
        let mut cur = self.left.load(Ordering::SeqCst);
        while cur > 0 {
            let k = n.min(cur);
            match self.left.compare_exchange(cur, cur - k, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return self.gauge.sub(k as i64),
                Err(now) => cur = now,
            }
        }
    }

    /// None of them waits any more.
    pub fn leave_all(&self) {
        let k = self.left.swap(0, Ordering::SeqCst);
        self.gauge.sub(k as i64);
    }
}

/// Ends the waiting when the route's future ends (answered, or dropped with its client).
struct LeaveOnDrop(Arc<Waiting>);

impl Drop for LeaveOnDrop {
    fn drop(&mut self) {
        self.0.leave_all();
    }
}

/// A request's validated sequences on their way to the backend.
pub struct Job {
    pub sequences: Vec<Vec<u32>>,
    pub task: Task,
    pub reply: oneshot::Sender<Reply>,
    pub sent_at: Instant,
    pub waiting: Arc<Waiting>,
}

/// The routes' side of the queue: the concurrency limit and the channel to the backend thread
/// (closed at shutdown, after the server stopped taking requests).
pub struct Queue {
    permits: Arc<Semaphore>,
    max_concurrent: usize,
    sender: Mutex<Option<mpsc::Sender<Job>>>,
    /// `te_queue_size`.
    gauge: IntGauge,
}

impl Queue {
    pub fn new(max_concurrent: usize, gauge: IntGauge) -> (Queue, mpsc::Receiver<Job>) {
        let (tx, rx) = mpsc::channel();
        let permits = Arc::new(Semaphore::new(max_concurrent));
        (Queue { permits, max_concurrent, sender: Mutex::new(Some(tx)), gauge }, rx)
    }

    /// A permit for one request, held until it is answered; 429 when all are taken (TEI's
    /// `try_acquire_permit`).
    pub fn admit(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        Arc::clone(&self.permits).try_acquire_owned().map_err(|_| {
            ApiError::overloaded(format!(
                "Model is overloaded: {} requests in flight (--max-concurrent-requests)",
                self.max_concurrent
            ))
        })
    }

    /// Requests admitted now.
    pub fn in_flight(&self) -> usize {
        self.max_concurrent - self.permits.available_permits()
    }

    /// Runs `sequences` and waits for their outputs, in order.
    pub async fn run(&self, sequences: Vec<Vec<u32>>, task: Task) -> Reply {
        let (reply, answer) = oneshot::channel();
        let waiting = Arc::new(Waiting::new(sequences.len(), self.gauge.clone()));
        let _leave = LeaveOnDrop(Arc::clone(&waiting));
        let job = Job { sequences, task, reply, sent_at: Instant::now(), waiting };
        let sent = match &*self.sender.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(tx) => tx.send(job).is_ok(),
            None => false,
        };
        if !sent {
            return Err(ApiError::new(ErrorKind::Unhealthy, "the server is shutting down"));
        }
        answer.await.unwrap_or_else(|_| Err(ApiError::new(ErrorKind::Backend, "the backend thread stopped")))
    }

    /// Closes the channel: the backend answers what it holds and stops.
    pub fn close(&self) {
        self.sender.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}
