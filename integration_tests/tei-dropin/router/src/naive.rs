//! The reference maps straight from the definition, as tests/naive_plan.c computes them, and
//! independent of the library: a row's path is the (token, position) pairs of its sequence from
//! the sequence start up to the row; the first occurrence of a path is the smallest row with the
//! same path (same offset in its sequence, same pairs); the compact rows are the first
//! occurrences, in increasing order, and every row scatters to its path's compact row.

/// The unpadded maps of one batch.
#[derive(Debug, PartialEq, Eq)]
pub struct NaivePlan {
    pub compact_ids: Vec<u32>,
    pub compact_pos: Vec<u32>,
    pub scatter: Vec<u32>,
    pub fold_gather: Vec<u32>,
}

/// Whether rows `a` and `b`, each `len` rows after its sequence start, have the same path.
fn same_path(ids: &[u32], pos: &[u32], a: usize, b: usize, len: usize) -> bool {
    (0..=len).all(|k| ids[a - k] == ids[b - k] && pos[a - k] == pos[b - k])
}

pub fn naive_plan(ids: &[u32], pos: &[u32], cu_seqlens: &[u32]) -> NaivePlan {
    let mut offset = vec![0usize; ids.len()]; // row - its sequence start
    for seq in cu_seqlens.windows(2) {
        for row in seq[0] as usize..seq[1] as usize {
            offset[row] = row - seq[0] as usize;
        }
    }
    let mut plan =
        NaivePlan { compact_ids: vec![], compact_pos: vec![], scatter: vec![0; ids.len()], fold_gather: vec![] };
    for i in 0..ids.len() {
        let first = (0..=i).find(|&k| offset[k] == offset[i] && same_path(ids, pos, k, i, offset[i])).unwrap_or(i);
        if first == i {
            plan.scatter[i] = plan.compact_ids.len() as u32;
            plan.compact_ids.push(ids[i]);
            plan.compact_pos.push(pos[i]);
            plan.fold_gather.push(i as u32);
        } else {
            plan.scatter[i] = plan.scatter[first];
        }
    }
    plan
}
