//! `set_planner_scratch_limit` / `release_planner_scratch`: the memory `compute_fold_and_scatter`
//! keeps per thread after an oversized batch, measured with glibc's `mallinfo2` (bytes in use, the
//! library's allocations included). Without a limit the scratch of a 400,000-token batch stays
//! (the plan's arrays alone are 8 MB); with a limit below it, the memory is back as the call
//! returns. One test in its own binary, so no other test allocates meanwhile.
use radix_mlp::{compute_fold_and_scatter, planner_scratch_limit, release_planner_scratch, set_planner_scratch_limit};

#[repr(C)]
struct Mallinfo2 {
    arena: usize,
    ordblks: usize,
    smblks: usize,
    hblks: usize,
    hblkhd: usize,
    usmblks: usize,
    fsmblks: usize,
    uordblks: usize,
    fordblks: usize,
    keepcost: usize,
}

extern "C" {
    fn mallinfo2() -> Mallinfo2;
}

/// Heap bytes in use (arena chunks and mmapped blocks), every arena.
fn in_use() -> usize {
    // SAFETY: glibc's mallinfo2 takes nothing and returns a struct.
    let m = unsafe { mallinfo2() };
    m.uordblks + m.hblkhd
}

/// `n_seqs` sequences of `len` tokens sharing nothing.
fn batch(n_seqs: u32, len: u32) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let ids = (0..n_seqs * len).collect();
    let pos = (0..n_seqs).flat_map(|_| 0..len).collect();
    let cu = (0..=n_seqs).map(|s| s * len).collect();
    (ids, pos, cu)
}

/// Bytes still in use after planning `b` (results dropped), relative to before it.
fn kept_after(b: &(Vec<u32>, Vec<u32>, Vec<u32>)) -> isize {
    let before = in_use();
    drop(compute_fold_and_scatter(&b.0, &b.1, &b.2, None));
    in_use() as isize - before as isize
}

#[test]
fn oversized_batch_scratch_is_given_back() {
    const MB: isize = 1 << 20;
    let (big, small) = (batch(4000, 100), batch(4, 100));
    assert_eq!(planner_scratch_limit(), None);
    drop(compute_fold_and_scatter(&small.0, &small.1, &small.2, None)); // the thread's planner exists

    let kept = kept_after(&big);
    assert!(kept > 4 * MB, "without a limit the scratch stays: {kept} bytes");
    let before = in_use();
    release_planner_scratch();
    let released = before as isize - in_use() as isize;
    assert!(released > 4 * MB, "release_planner_scratch gave back only {released} bytes");

    set_planner_scratch_limit(Some(10_000));
    assert_eq!(planner_scratch_limit(), Some(10_000));
    drop(compute_fold_and_scatter(&small.0, &small.1, &small.2, None));
    let kept = kept_after(&big);
    assert!(kept < MB, "above the limit the scratch is given back: {kept} bytes kept");
    let kept = kept_after(&small);
    assert!(kept.abs() < MB, "within the limit the planner stays: {kept} bytes");
    set_planner_scratch_limit(None);
}
