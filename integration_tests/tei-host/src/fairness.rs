//! Which sequences enter the batcher next, so that no request holds the backend (issue 49). The
//! batcher is filled only up to one batch's budget, and the jobs with sequences left take it in
//! turns: the job that has been served the fewest tokens first (a new one: none), each turn a
//! quantum of the room (the room over the jobs, at least one sequence), passes until the room is
//! used. A small request that arrives behind a maximal one is then in the next batch: it waits for
//! the batch being run and its own, two batches' time at most. So that a long sequence is not
//! passed over for ever, a job whose next sequence found no room in two fills in a row goes first,
//! and nothing passes it until it is in. Among what is in the batcher, the library's batcher still
//! groups shared prefixes (docs/batching.md).
use std::collections::{HashMap, VecDeque};

/// A job's place in the turns.
#[derive(Debug, Default, Clone, Copy)]
struct Turn {
    /// Tokens moved into the batcher so far.
    served: usize,
    /// Fills in a row in which its next sequence found no room.
    passed_over: u32,
}

/// Fills a job may be passed over before it goes first.
const PATIENCE: u32 = 2;

/// The jobs (by key, in arrival order) with sequences not yet in the batcher.
#[derive(Debug, Default)]
pub struct Turns {
    jobs: HashMap<u64, Turn>,
}

/// The room a fill has: tokens and sequences, and whether the batcher is empty (then one
/// sequence longer than the room may go alone).
#[derive(Clone, Copy, Debug)]
pub struct Room {
    pub tokens: usize,
    pub sequences: usize,
    pub batcher_empty: bool,
}

impl Room {
    fn fits(&self, len: usize) -> bool {
        self.sequences > 0 && (len <= self.tokens || self.batcher_empty)
    }
}

impl Turns {
    pub fn add(&mut self, key: u64) {
        self.jobs.insert(key, Turn::default());
    }

    pub fn remove(&mut self, key: u64) {
        self.jobs.remove(&key);
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Moves sequences into `room`, job by job in turn: `next_len(key)` is the length of a job's
    /// next sequence (None when it has none left), `take(key)` moves that sequence into the
    /// batcher. A job left with no sequence is forgotten.
    pub fn fill(&mut self, mut room: Room, mut next_len: impl FnMut(u64) -> Option<usize>, mut take: impl FnMut(u64)) {
        let mut order: Vec<(bool, usize, u64)> =
            self.jobs.iter().map(|(&k, t)| (t.passed_over < PATIENCE, t.served, k)).collect();
        order.sort_unstable();
        let mut queue: VecDeque<u64> = order.into_iter().map(|(_, _, k)| k).collect();
        let mut moved: HashMap<u64, usize> = HashMap::new();
        let mut blocked: Vec<u64> = Vec::new();
        'passes: while room.sequences > 0 && !queue.is_empty() {
            let quantum = (room.tokens / queue.len()).max(1);
            let mut progress = false;
            for _ in 0..queue.len() {
                let Some(key) = queue.pop_front() else { break };
                let mut used = 0;
                while let Some(len) = next_len(key) {
                    if !room.fits(len) {
                        if used == 0 {
                            blocked.push(key);
                            if self.jobs[&key].passed_over >= PATIENCE {
                                break 'passes; // it goes in next, before anyone else
                            }
                        }
                        break;
                    }
                    if used > 0 && used + len > quantum {
                        break; // its turn is over
                    }
                    take(key);
                    used += len;
                    room.tokens = room.tokens.saturating_sub(len);
                    room.sequences -= 1;
                    room.batcher_empty = false;
                    progress = true;
                }
                if used > 0 {
                    *moved.entry(key).or_default() += used;
                    if next_len(key).is_some() && !blocked.contains(&key) {
                        queue.push_back(key);
                    }
                }
            }
            if !progress {
                break;
            }
        }
        let keys: Vec<u64> = self.jobs.keys().copied().collect();
        for key in keys {
            if next_len(key).is_none() {
                self.jobs.remove(&key);
                continue;
            }
            let t = self.jobs.get_mut(&key).expect("present");
            match moved.get(&key) {
                Some(&n) => *t = Turn { served: t.served + n, passed_over: 0 },
                None => t.passed_over += 1, // blocked, or not reached
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Jobs as lists of sequence lengths; returns the keys taken, in order.
    fn fill(turns: &mut Turns, jobs: &mut HashMap<u64, Vec<usize>>, room: Room) -> Vec<u64> {
        let mut taken = Vec::new();
        let lens: std::cell::RefCell<&mut HashMap<u64, Vec<usize>>> = std::cell::RefCell::new(jobs);
        turns.fill(
            room,
            |k| lens.borrow().get(&k).and_then(|v| v.first().copied()),
            |k| {
                lens.borrow_mut().get_mut(&k).unwrap().remove(0);
                taken.push(k);
            },
        );
        taken
    }

    #[test]
    fn a_small_job_behind_a_maximal_one_is_in_the_next_window() {
        let mut turns = Turns::default();
        let mut jobs = HashMap::from([(1, vec![8192; 32])]);
        turns.add(1);
        let room = Room { tokens: 16384, sequences: usize::MAX, batcher_empty: true };
        assert_eq!(fill(&mut turns, &mut jobs, room), [1, 1]);
        jobs.insert(2, vec![5, 7]);
        turns.add(2);
        // The new job, served nothing yet, goes first; the big one gets what room is left.
        assert_eq!(fill(&mut turns, &mut jobs, room), [2, 2, 1]);
        assert!(jobs[&2].is_empty());
        // Even when one of the big job's sequences fills a batch.
        let mut jobs = HashMap::from([(3, vec![16384; 4])]);
        turns.add(3);
        assert_eq!(fill(&mut turns, &mut jobs, room), [3]);
        jobs.insert(4, vec![3]);
        turns.add(4);
        assert_eq!(fill(&mut turns, &mut jobs, room), [4]);
        assert_eq!(fill(&mut turns, &mut jobs, room), [3]);
    }

    #[test]
    fn turns_share_the_room_and_a_long_sequence_is_not_passed_over_for_ever() {
        let mut turns = Turns::default();
        let mut jobs = HashMap::from([(1, vec![10; 4]), (2, vec![10; 4])]);
        turns.add(1);
        turns.add(2);
        let room = Room { tokens: 40, sequences: usize::MAX, batcher_empty: false };
        // Quantum 20 each.
        assert_eq!(fill(&mut turns, &mut jobs, room), [1, 1, 2, 2]);
        // A job of one long sequence, and small jobs that keep coming: it waits two fills at most,
        // then goes first and nothing passes it.
        let mut jobs = HashMap::from([(5, vec![100])]);
        turns.add(5);
        let small_room = Room { tokens: 60, sequences: usize::MAX, batcher_empty: false };
        for k in [6, 7] {
            jobs.insert(k, vec![10]);
            turns.add(k);
            let taken = fill(&mut turns, &mut jobs, small_room);
            assert!(!taken.contains(&5), "{taken:?}");
        }
        jobs.insert(8, vec![10]);
        turns.add(8);
        assert_eq!(fill(&mut turns, &mut jobs, small_room), Vec::<u64>::new(), "job 8 passed job 5");
        let empty = Room { tokens: 60, sequences: usize::MAX, batcher_empty: true };
        assert_eq!(fill(&mut turns, &mut jobs, empty), [5]);
        assert_eq!(fill(&mut turns, &mut jobs, empty), [8]);
        assert!(turns.is_empty());
        // The sequence budget holds too.
        let mut jobs = HashMap::from([(9, vec![1; 10])]);
        turns.add(9);
        let few = Room { tokens: 100, sequences: 3, batcher_empty: true };
        assert_eq!(fill(&mut turns, &mut jobs, few), [9, 9, 9]);
    }
}
