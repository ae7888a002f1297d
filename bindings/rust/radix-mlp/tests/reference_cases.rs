//! The published `radix_mlp` crate's own test cases, run against this crate's
//! `compute_fold_and_scatter`, with the exact vectors the reference returns (compact rows in
//! order of first occurrence, so every output is determined).
use radix_mlp::compute_fold_and_scatter;

type Fold = (Vec<u32>, Vec<u32>, Vec<u32>, Vec<u32>);

/// Runs the function and checks the properties every result has: scatter reconstructs the
/// batch, and every compact row up to the last one scattered to is used, with fold_gather
/// its first occurrence.
fn fold(ids: &[u32], pos: &[u32], cu: &[u32], pad: Option<usize>) -> Fold {
    let out = compute_fold_and_scatter(ids, pos, cu, pad);
    let (cids, cpos, scatter, gather) = &out;
    assert_eq!(scatter.len(), ids.len());
    assert_eq!(cids.len(), cpos.len());
    assert_eq!(cids.len(), gather.len());
    let n_compact = scatter.iter().map(|&s| s as usize + 1).max().unwrap_or(0);
    for (i, &s) in scatter.iter().enumerate() {
        assert_eq!((cids[s as usize], cpos[s as usize]), (ids[i], pos[i]), "row {i}");
    }
    for (j, &g) in gather.iter().enumerate().take(n_compact) {
        let first = scatter.iter().position(|&s| s as usize == j).expect("every compact row is used");
        assert_eq!(g as usize, first, "fold_gather[{j}]");
    }
    out
}

fn v(r: std::ops::RangeInclusive<u32>) -> Vec<u32> {
    r.collect()
}

const EXAMPLE_IDS: [u32; 15] = [1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 5, 6, 7, 8, 9];
const EXAMPLE_POS: [u32; 15] = [0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6, 7];
const EXAMPLE_CU: [u32; 4] = [0, 7, 10, 15];

#[test]
fn empty() {
    let empty = (vec![], vec![], vec![], vec![]);
    assert_eq!(fold(&[], &[], &[], None), empty);
    // The fast path ignores cu_seq_lengths and padding.
    assert_eq!(fold(&[], &[], &[0], Some(8)), empty);
    assert_eq!(fold(&[], &[], &[7, 3], None), empty);
}

#[test]
fn single_sequence_is_identity() {
    let out = fold(&[1, 2, 3], &[0, 1, 2], &[0, 3], None);
    assert_eq!(out, (vec![1, 2, 3], vec![0, 1, 2], vec![0, 1, 2], vec![0, 1, 2]));
}

#[test]
fn example_from_comments() {
    // The third sequence starts at the root with positions 3..=7, so it shares nothing:
    // 7 + 0 + 5 = 12 compact rows.
    let (cids, cpos, scatter, gather) = fold(&EXAMPLE_IDS, &EXAMPLE_POS, &EXAMPLE_CU, None);
    assert_eq!(cids, [1, 2, 3, 4, 5, 6, 7, 5, 6, 7, 8, 9]);
    assert_eq!(cpos, [0, 1, 2, 3, 4, 5, 6, 3, 4, 5, 6, 7]);
    assert_eq!(scatter, [v(0..=6), vec![0, 1, 2], v(7..=11)].concat());
    assert_eq!(gather, [v(0..=6), v(10..=14)].concat());
}

#[test]
fn identical_sequences() {
    let out = fold(&[1, 2, 3, 1, 2, 3], &[0, 1, 2, 0, 1, 2], &[0, 3, 6], None);
    assert_eq!(out, (vec![1, 2, 3], vec![0, 1, 2], vec![0, 1, 2, 0, 1, 2], vec![0, 1, 2]));
}

#[test]
fn fold_gather_points_to_first_occurrence() {
    let out = fold(&[1, 2, 3, 4, 1, 2, 5, 6], &[0, 1, 2, 3, 0, 1, 2, 3], &[0, 4, 8], None);
    assert_eq!(
        out,
        (vec![1, 2, 3, 4, 5, 6], vec![0, 1, 2, 3, 2, 3], vec![0, 1, 2, 3, 0, 1, 4, 5], vec![0, 1, 2, 3, 6, 7])
    );
}

#[test]
fn no_overlap_is_identity() {
    let out = fold(&[1, 2, 3, 4], &[0, 1, 0, 1], &[0, 2, 4], None);
    assert_eq!(out, (vec![1, 2, 3, 4], vec![0, 1, 0, 1], vec![0, 1, 2, 3], vec![0, 1, 2, 3]));
}

#[test]
fn partial_overlap() {
    let out = fold(&[1, 2, 3, 1, 2, 4], &[0, 1, 2, 0, 1, 2], &[0, 3, 6], None);
    assert_eq!(out, (vec![1, 2, 3, 4], vec![0, 1, 2, 2], vec![0, 1, 2, 0, 1, 3], vec![0, 1, 2, 5]));
}

#[test]
fn different_positions_do_not_merge() {
    let out = fold(&[1, 2, 1, 2], &[0, 1, 2, 3], &[0, 2, 4], None);
    assert_eq!(out, (vec![1, 2, 1, 2], vec![0, 1, 2, 3], vec![0, 1, 2, 3], vec![0, 1, 2, 3]));
}

#[test]
fn three_sequences() {
    let ids = [1, 2, 3, 4, 1, 2, 5, 6, 1, 2, 3, 7];
    let pos = [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3];
    let out = fold(&ids, &pos, &[0, 4, 8, 12], None);
    assert_eq!(
        out,
        (
            vec![1, 2, 3, 4, 5, 6, 7],
            vec![0, 1, 2, 3, 2, 3, 3],
            vec![0, 1, 2, 3, 0, 1, 4, 5, 0, 1, 2, 6],
            vec![0, 1, 2, 3, 6, 7, 11]
        )
    );
}

#[test]
fn single_token_sequences() {
    let out = fold(&[1, 2, 1], &[0, 0, 0], &[0, 1, 2, 3], None);
    assert_eq!(out, (vec![1, 2], vec![0, 0], vec![0, 1, 0], vec![0, 1]));
}

#[test]
fn deterministic() {
    let a = fold(&EXAMPLE_IDS, &EXAMPLE_POS, &EXAMPLE_CU, Some(8));
    let b = fold(&EXAMPLE_IDS, &EXAMPLE_POS, &EXAMPLE_CU, Some(8));
    assert_eq!(a, b);
}

#[test]
fn padding_appends_zero_rows() {
    let (cids, cpos, scatter, gather) = fold(&EXAMPLE_IDS, &EXAMPLE_POS, &EXAMPLE_CU, Some(8));
    assert_eq!(cids, [1, 2, 3, 4, 5, 6, 7, 5, 6, 7, 8, 9, 0, 0, 0, 0]);
    assert_eq!(cpos, [0, 1, 2, 3, 4, 5, 6, 3, 4, 5, 6, 7, 0, 0, 0, 0]);
    assert_eq!(gather, [v(0..=6), v(10..=14), vec![0; 4]].concat());
    assert!(scatter.iter().all(|&s| s < 12));
    assert_eq!(scatter, fold(&EXAMPLE_IDS, &EXAMPLE_POS, &EXAMPLE_CU, None).2);

    let (cids, cpos, _, gather) = fold(&[1, 2, 3, 1, 2, 4], &[0, 1, 2, 0, 1, 2], &[0, 3, 6], Some(8));
    assert_eq!(cids, [1, 2, 3, 4, 0, 0, 0, 0]);
    assert_eq!(cpos, [0, 1, 2, 2, 0, 0, 0, 0]);
    assert_eq!(gather, [0, 1, 2, 5, 0, 0, 0, 0]);
}

#[test]
fn padding_when_already_a_multiple() {
    let ids = v(0..=7);
    let unpadded = fold(&ids, &ids, &[0, 8], None);
    assert_eq!(fold(&ids, &ids, &[0, 8], Some(8)), unpadded);
    assert_eq!(fold(&ids, &ids, &[0, 8], Some(4)), unpadded);
    assert_eq!(fold(&ids, &ids, &[0, 8], Some(1)), unpadded);
    // 4 compact rows, multiple 4 or 2: unchanged.
    let shared = fold(&[1, 2, 3, 1, 2, 4], &[0, 1, 2, 0, 1, 2], &[0, 3, 6], None);
    assert_eq!(fold(&[1, 2, 3, 1, 2, 4], &[0, 1, 2, 0, 1, 2], &[0, 3, 6], Some(4)), shared);
    assert_eq!(fold(&[1, 2, 3, 1, 2, 4], &[0, 1, 2, 0, 1, 2], &[0, 3, 6], Some(2)), shared);
}

#[test]
fn padding_past_the_library_maximum() {
    // The reference pads to any multiple; RMLP_MAX_PAD_MULTIPLE (4096) bounds the library's plans,
    // not this function (TEI passes RADIX_MLP_PAD through unchecked).
    let (ids, pos, cu) = ([1, 2, 3, 1, 2, 4], [0, 1, 2, 0, 1, 2], [0, 3, 6]);
    let unpadded = fold(&ids, &pos, &cu, None);
    for multiple in [4096, 4097, 8192, 100_000] {
        let (cids, cpos, scatter, gather) = fold(&ids, &pos, &cu, Some(multiple));
        assert_eq!((cids.len(), cpos.len(), gather.len()), (multiple, multiple, multiple), "Some({multiple})");
        assert_eq!((&cids[..4], &cpos[..4], &gather[..4]), (&unpadded.0[..], &unpadded.1[..], &unpadded.3[..]));
        assert!(cids[4..].iter().chain(&cpos[4..]).chain(&gather[4..]).all(|&x| x == 0), "Some({multiple}): padding");
        assert_eq!(scatter, unpadded.2);
    }
    // 8193 compact rows (one sequence, all distinct) pad to 16384 at Some(8192).
    let long: Vec<u32> = (0..8193).collect();
    let (cids, ..) = fold(&long, &long, &[0, 8193], Some(8192));
    assert_eq!(cids.len(), 16384);
}

#[test]
#[should_panic(expected = "cu_seqlens[0]=1")]
fn invalid_seqlens_panic_with_library_message() {
    compute_fold_and_scatter(&[1, 2], &[0, 1], &[1, 2], None);
}

#[test]
#[should_panic(expected = "pad_multiple_of is 0")]
fn zero_padding_multiple_panics() {
    compute_fold_and_scatter(&[1, 2], &[0, 1], &[0, 2], Some(0));
}

#[test]
#[should_panic(expected = "position_ids has 1")]
fn mismatched_lengths_panic() {
    compute_fold_and_scatter(&[1, 2], &[0], &[0, 2], None);
}
