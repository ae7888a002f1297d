//! The queue of a TEI-shaped server: requests wait in order; a background thread owns them and,
//! asked for the next batch, takes requests while they fit the token and request budgets, lays
//! them out flat (`input_ids`, `position_ids`, `cumulative_seq_lengths`) and computes the RadixMLP
//! maps with `radix_mlp::compute_fold_and_scatter`, keeping them when the padded compact length
//! over the batch length is below the threshold (TEI's gate, in `f32`, off at `<= 1e-6`). The
//! padding multiple is TEI's `RADIX_MLP_PAD`, read once when the queue starts.
use std::collections::VecDeque;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread;

/// One tokenized request.
#[derive(Clone, Debug)]
pub struct Entry {
    pub input_ids: Vec<u32>,
    pub position_ids: Vec<u32>,
}

/// A batch as the backend receives it; the four maps are `None` when the gate declined.
#[derive(Clone, Debug, Default)]
pub struct Batch {
    pub input_ids: Vec<u32>,
    pub position_ids: Vec<u32>,
    pub cumulative_seq_lengths: Vec<u32>,
    pub max_length: u32,
    pub compact_input_ids: Option<Vec<u32>>,
    pub compact_position_ids: Option<Vec<u32>>,
    pub scatter_unfold: Option<Vec<u32>>,
    pub fold_gather: Option<Vec<u32>>,
}

/// How the queue batches: the budgets, the gate threshold (TEI's `--radix-mlp-threshold`) and the
/// padding multiple (TEI's `RADIX_MLP_PAD`).
#[derive(Clone, Copy, Debug)]
pub struct QueueConfig {
    pub max_batch_tokens: usize,
    pub max_batch_requests: Option<usize>,
    pub radix_mlp_threshold: f32,
    pub radix_mlp_pad: Option<usize>,
}

/// `RADIX_MLP_PAD` as TEI's queue reads it: a whole number, anything else (or unset) is no padding.
pub fn radix_mlp_pad_from_env() -> Option<usize> {
    std::env::var("RADIX_MLP_PAD").ok().and_then(|s| s.parse().ok())
}

enum Command {
    Append(Entry),
    NextBatch(Sender<Option<Batch>>),
}

/// The handle of the queue's background thread.
pub struct Queue {
    sender: Sender<Command>,
}

impl Queue {
    pub fn new(config: QueueConfig) -> Queue {
        let (sender, receiver) = channel();
        thread::spawn(move || queue_task(config, receiver));
        Queue { sender }
    }

    pub fn append(&self, entry: Entry) {
        self.sender.send(Command::Append(entry)).expect("the queue thread is alive");
    }

    /// The next batch, `None` when no request waits.
    pub fn next_batch(&self) -> Option<Batch> {
        let (reply, answer) = channel();
        self.sender.send(Command::NextBatch(reply)).expect("the queue thread is alive");
        answer.recv().expect("the queue thread answers")
    }
}

fn queue_task(config: QueueConfig, commands: Receiver<Command>) {
    let mut entries = VecDeque::new();
    while let Ok(command) = commands.recv() {
        match command {
            Command::Append(entry) => entries.push_back(entry),
            Command::NextBatch(reply) => {
                let _ = reply.send(take_batch(&mut entries, &config));
            }
        }
    }
}

/// Takes the requests that fit from the front of `entries` and plans them.
fn take_batch(entries: &mut VecDeque<Entry>, config: &QueueConfig) -> Option<Batch> {
    let mut batch = Batch { cumulative_seq_lengths: vec![0], ..Batch::default() };
    let mut requests = 0;
    while let Some(entry) = entries.pop_front() {
        if batch.input_ids.len() + entry.input_ids.len() > config.max_batch_tokens {
            entries.push_front(entry);
            break;
        }
        batch.max_length = batch.max_length.max(entry.input_ids.len() as u32);
        batch.input_ids.extend(entry.input_ids);
        batch.position_ids.extend(entry.position_ids);
        batch.cumulative_seq_lengths.push(batch.input_ids.len() as u32);
        requests += 1;
        if Some(requests) == config.max_batch_requests {
            break;
        }
    }
    if requests == 0 {
        return None;
    }
    let threshold = config.radix_mlp_threshold;
    if threshold > 1e-6 && !batch.input_ids.is_empty() {
        let (ids, positions, scatter, gather) = radix_mlp::compute_fold_and_scatter(
            &batch.input_ids,
            &batch.position_ids,
            &batch.cumulative_seq_lengths,
            config.radix_mlp_pad,
        );
        let ratio = ids.len() as f32 / batch.input_ids.len() as f32;
        if threshold >= 1.0 || ratio < threshold {
            batch.compact_input_ids = Some(ids);
            batch.compact_position_ids = Some(positions);
            batch.scatter_unfold = Some(scatter);
            batch.fold_gather = Some(gather);
        }
    }
    Some(batch)
}
