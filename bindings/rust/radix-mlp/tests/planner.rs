//! `Planner`: the gate, errors carrying the library's message, reuse after an error, owned
//! copies, one planner per thread, and a randomized comparison of `compute_fold_and_scatter`
//! against a naive implementation of the same semantics (written here, for the test only).
use std::collections::HashMap;

use radix_mlp::{compute_fold_and_scatter, Plan, PlanParams, Planner, Status, NO_PARENT};

const SHARED_IDS: [u32; 6] = [1, 2, 3, 1, 2, 4];
const SHARED_POS: [u32; 6] = [0, 1, 2, 0, 1, 2];
const SHARED_CU: [u32; 3] = [0, 3, 6];

fn params(threshold: f64, pad_multiple_of: Option<u32>) -> PlanParams {
    PlanParams { threshold, pad_multiple_of, gate: Default::default() }
}

fn plan(ids: &[u32], pos: &[u32], cu: &[u32], params: &PlanParams) -> Plan {
    Planner::new().unwrap().build(ids, pos, cu, params).unwrap().to_owned()
}

fn iota(n: u32) -> Vec<u32> {
    (0..n).collect()
}

fn assert_identity(p: &Plan, ids: &[u32], pos: &[u32]) {
    let n = ids.len() as u32;
    assert!(!p.use_radix);
    assert_eq!((p.n_compact, p.n_compact_padded), (ids.len(), ids.len()));
    assert_eq!((p.fold_gather.clone(), p.scatter.clone()), (iota(n), iota(n)));
    assert_eq!((p.compact_input_ids.as_slice(), p.compact_position_ids.as_slice()), (ids, pos));
}

#[test]
fn default_params_are_the_library_defaults() {
    assert_eq!(PlanParams::default(), params(0.85, None));
    let raw = radix_mlp_sys::rmlp_plan_params::from(&params(0.5, Some(16)));
    assert_eq!(raw.struct_size as usize, std::mem::size_of::<radix_mlp_sys::rmlp_plan_params>());
    assert!(raw.pad);
    assert_eq!((raw.pad_multiple_of, raw.threshold), (16, 0.5));
}

#[test]
fn gate() {
    // Threshold 0: identity and the trie is skipped (n_distinct == n_tokens).
    let off = plan(&SHARED_IDS, &SHARED_POS, &SHARED_CU, &params(0.0, Some(8)));
    assert_identity(&off, &SHARED_IDS, &SHARED_POS);
    assert_eq!(off.n_distinct, 6);
    assert_eq!(off.compact_parent, [NO_PARENT, 0, 1, NO_PARENT, 3, 4]);

    // Threshold 1.0: always radix, padded.
    let on = plan(&SHARED_IDS, &SHARED_POS, &SHARED_CU, &params(1.0, Some(8)));
    assert!(on.use_radix);
    assert_eq!((on.n_distinct, on.n_compact, on.n_compact_padded), (4, 4, 8));
    assert_eq!(on.scatter, [0, 1, 2, 0, 1, 3]);
    assert_eq!(on.compact_parent, [NO_PARENT, 0, 1, 1, NO_PARENT, NO_PARENT, NO_PARENT, NO_PARENT]);
    assert!((on.compact_ratio - 4.0 / 6.0).abs() < 1e-12);

    // Default 0.85: 4/6 shares enough; a batch sharing nothing gets the identity.
    assert!(plan(&SHARED_IDS, &SHARED_POS, &SHARED_CU, &PlanParams::default()).use_radix);
    let ids = [1, 2, 3, 4];
    let pos = [0, 1, 0, 1];
    let none = plan(&ids, &pos, &[0, 2, 4], &PlanParams::default());
    assert_identity(&none, &ids, &pos);
    assert_eq!(none.compact_ratio, 1.0);

    // 4/6 is not below 0.5: identity, but the trie ran and counted 4 paths.
    let high = plan(&SHARED_IDS, &SHARED_POS, &SHARED_CU, &params(0.5, Some(8)));
    assert_identity(&high, &SHARED_IDS, &SHARED_POS);
    assert_eq!(high.n_distinct, 4);
}

#[test]
fn empty_batches() {
    for threshold in [0.0, 0.85, 1.0] {
        for cu in [&[0, 0][..], &[0, 0, 0][..]] {
            // A fresh planner has no arrays yet: the view must not build slices from NULL.
            let p = plan(&[], &[], cu, &params(threshold, Some(8)));
            assert_eq!((p.n_tokens, p.n_seqs, p.n_compact_padded), (0, cu.len() - 1, 0));
            assert_eq!(p.compact_ratio, 1.0);
            assert!(p.scatter.is_empty() && p.fold_gather.is_empty() && p.compact_parent.is_empty());
        }
    }
}

fn build_err(ids: &[u32], pos: &[u32], cu: &[u32], params: &PlanParams) -> radix_mlp::Error {
    Planner::new().unwrap().build(ids, pos, cu, params).unwrap_err()
}

#[test]
fn errors_carry_the_library_message() {
    let d = PlanParams::default();
    let e = build_err(&[1, 2, 3], &[0, 1, 2], &[1, 3], &d);
    assert_eq!(e.status, Status::InvalidSeqlens);
    assert!(e.message.contains("cu_seqlens[0]=1"), "{e}");
    assert!(e.to_string().contains("cu_seqlens[0]=1") && e.to_string().contains("invalid cu_seqlens"), "{e}");

    let e = build_err(&[1, 2, 3], &[0, 1, 2], &[0, 2, 1, 3], &d);
    assert_eq!(e.status, Status::InvalidSeqlens);
    assert!(e.message.contains("cu_seqlens[2]=1 < cu_seqlens[1]=2"), "{e}");

    let e = build_err(&[1, 2, 3], &[0, 1, 2], &[0, 2], &d);
    assert!(e.message.contains("must equal n_tokens=3"), "{e}");

    let e = build_err(&[1, 2, 3], &[0, 1], &[0, 3], &d);
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("input_ids has 3 entries but position_ids has 2"), "{e}");

    let e = build_err(&[], &[], &[], &d);
    assert_eq!(e.status, Status::InvalidSeqlens);
    assert!(e.message.contains("cu_seq_lengths is empty"), "{e}");

    let e = build_err(&SHARED_IDS, &SHARED_POS, &SHARED_CU, &params(f64::NAN, None));
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("threshold is NaN"), "{e}");

    let e = build_err(&SHARED_IDS, &SHARED_POS, &SHARED_CU, &params(-0.5, None));
    assert!(e.message.contains("negative"), "{e}");

    let e = build_err(&SHARED_IDS, &SHARED_POS, &SHARED_CU, &params(1.0, Some(0)));
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("pad_multiple_of is 0"), "{e}");

    let e = Planner::new().unwrap().reserve(usize::MAX, 1, 1).unwrap_err();
    assert_eq!(e.status, Status::TooLarge);
    assert!(e.message.contains("exceeds 2^32-1"), "{e}");
}

#[test]
fn planner_keeps_working_after_an_error() {
    let p = params(1.0, Some(8));
    let expected = plan(&SHARED_IDS, &SHARED_POS, &SHARED_CU, &p);
    let mut planner = Planner::new().unwrap();
    planner.reserve(64, 4, 8).unwrap();
    assert!(planner.build(&SHARED_IDS, &SHARED_POS, &SHARED_CU, &p).is_ok());
    assert!(planner.build(&SHARED_IDS, &SHARED_POS, &[1, 6], &p).is_err());
    assert!(planner.build(&SHARED_IDS, &SHARED_POS, &SHARED_CU, &params(f64::NAN, None)).is_err());
    let again = planner.build(&SHARED_IDS, &SHARED_POS, &SHARED_CU, &p).unwrap().to_owned();
    assert_eq!(Plan { build_us: 0.0, ..again }, Plan { build_us: 0.0, ..expected });
}

#[test]
fn to_owned_equals_the_view() {
    let mut planner = Planner::new().unwrap();
    let view = planner.build(&SHARED_IDS, &SHARED_POS, &SHARED_CU, &params(1.0, Some(8))).unwrap();
    let owned = view.to_owned();
    assert_eq!(owned.n_tokens, view.n_tokens());
    assert_eq!(owned.n_seqs, view.n_seqs());
    assert_eq!(owned.n_distinct, view.n_distinct());
    assert_eq!(owned.n_compact, view.n_compact());
    assert_eq!(owned.n_compact_padded, view.n_compact_padded());
    assert_eq!(owned.use_radix, view.use_radix());
    assert_eq!(owned.compact_ratio, view.compact_ratio());
    assert_eq!(owned.build_us, view.build_us());
    assert!(view.build_us() >= 0.0);
    assert_eq!(owned.fold_gather, view.fold_gather());
    assert_eq!(owned.scatter, view.scatter());
    assert_eq!(owned.compact_input_ids, view.compact_input_ids());
    assert_eq!(owned.compact_position_ids, view.compact_position_ids());
    assert_eq!(owned.compact_parent, view.compact_parent());
}

/// Deterministic PRNG (SplitMix64) so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u32) -> u32 {
        (self.next() % n as u64) as u32
    }
}

/// A random batch over a vocabulary of 2-3 tokens, so paths are shared often. Positions
/// usually start at 0, sometimes at 1 or 2, so equal tokens at other positions occur too.
fn random_batch(rng: &mut Rng) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let vocab = 2 + rng.below(2);
    let (mut ids, mut pos, mut cu) = (vec![], vec![], vec![0]);
    for _ in 0..1 + rng.below(6) {
        let start = if rng.below(4) == 0 { rng.below(3) } else { 0 };
        for p in 0..rng.below(9) {
            ids.push(rng.below(vocab));
            pos.push(start + p);
        }
        cu.push(ids.len() as u32);
    }
    (ids, pos, cu)
}

/// The semantics spelled out: one compact row per distinct full path prefix of
/// (token, position) pairs, in order of first occurrence, then zero padding rows.
fn naive(ids: &[u32], pos: &[u32], cu: &[u32], pad: Option<usize>) -> (Vec<u32>, Vec<u32>, Vec<u32>, Vec<u32>) {
    let (mut cids, mut cpos, mut scatter, mut gather) = (vec![], vec![], vec![], vec![]);
    if ids.is_empty() {
        return (cids, cpos, scatter, gather);
    }
    let mut rows: HashMap<Vec<(u32, u32)>, u32> = HashMap::new();
    for s in cu.windows(2) {
        let mut path = Vec::new();
        for i in s[0] as usize..s[1] as usize {
            path.push((ids[i], pos[i]));
            let row = *rows.entry(path.clone()).or_insert_with(|| {
                cids.push(ids[i]);
                cpos.push(pos[i]);
                gather.push(i as u32);
                cids.len() as u32 - 1
            });
            scatter.push(row);
        }
    }
    if let Some(n) = pad {
        while cids.len() % n != 0 {
            cids.push(0);
            cpos.push(0);
            gather.push(0);
        }
    }
    (cids, cpos, scatter, gather)
}

#[test]
fn randomized_against_naive() {
    let mut rng = Rng(0x5EED);
    for case in 0..3000 {
        let (ids, pos, cu) = random_batch(&mut rng);
        let pad = match rng.below(3) {
            0 => None,
            _ => Some(1 + rng.below(9) as usize),
        };
        assert_eq!(
            compute_fold_and_scatter(&ids, &pos, &cu, pad),
            naive(&ids, &pos, &cu, pad),
            "case {case}: ids {ids:?} pos {pos:?} cu {cu:?} pad {pad:?}"
        );
    }
}

#[test]
fn one_planner_per_thread_matches_serial() {
    let mut rng = Rng(42);
    let batches: Vec<_> = (0..200).map(|_| random_batch(&mut rng)).collect();
    let p = params(0.85, Some(8));
    let run = |planner: &mut Planner, batches: &[(Vec<u32>, Vec<u32>, Vec<u32>)]| -> Vec<Plan> {
        batches
            .iter()
            .map(|(ids, pos, cu)| Plan { build_us: 0.0, ..planner.build(ids, pos, cu, &p).unwrap().to_owned() })
            .collect()
    };
    let serial = run(&mut Planner::new().unwrap(), &batches);
    let (batches, run) = (&batches, &run);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                // Planner is Send: create it here, move it into the thread.
                let mut planner = Planner::new().unwrap();
                scope.spawn(move || {
                    let plans = run(&mut planner, batches);
                    let free_fn = compute_fold_and_scatter(&SHARED_IDS, &SHARED_POS, &SHARED_CU, None);
                    (plans, free_fn)
                })
            })
            .collect();
        for h in handles {
            let (plans, free_fn) = h.join().unwrap();
            assert!(plans == serial);
            assert_eq!(free_fn.2, [0, 1, 2, 0, 1, 3]);
        }
    });
}

/// The layout of attention in compact space of a plan: what `qo_indptr` and the path runs
/// promise (docs/design.md, "Attention in compact space"), checked against the maps.
fn check_layout(p: &Plan, case: &str) {
    assert_eq!(p.qo_indptr.len(), p.n_seqs + 1, "{case}");
    assert_eq!((p.qo_indptr[0], p.qo_indptr[p.n_seqs] as usize), (0, p.n_compact), "{case}");
    for s in 0..p.n_seqs {
        let (begin, end) = (p.cu_seqlens[s] as usize, p.cu_seqlens[s + 1] as usize);
        let path = &p.scatter[begin..end];
        // Owned rows: the compact rows first reached in this sequence, the last rows of its path.
        let owned = p.owned_rows(s);
        assert!(owned.start <= owned.end && owned.len() <= path.len(), "{case}: sequence {s}");
        let first_here: Vec<u32> =
            (0..p.n_compact as u32).filter(|&r| (begin..end).contains(&(p.fold_gather[r as usize] as usize))).collect();
        assert_eq!(first_here, owned.clone().map(|r| r as u32).collect::<Vec<_>>(), "{case}: sequence {s} owns");
        assert_eq!(&path[path.len() - owned.len()..], &first_here[..], "{case}: sequence {s}'s owned suffix");
        // Runs: maximal pieces of consecutive compact rows that reassemble the path.
        let (mut at, mut rebuilt, mut last_end) = (begin, Vec::new(), None);
        for run in p.path_runs(s) {
            assert!(run.len > 0 && run.batch_start == at, "{case}: sequence {s}: {run:?} at row {at}");
            assert_ne!(Some(run.compact_start), last_end, "{case}: sequence {s}: {run:?} continues its predecessor");
            rebuilt.extend((run.compact_start..run.compact_start + run.len).map(|r| r as u32));
            at += run.len;
            last_end = Some(run.compact_start + run.len);
        }
        assert_eq!((at, &rebuilt[..]), (end, path), "{case}: sequence {s}'s runs");
    }
}

#[test]
fn compact_layout() {
    // [1, 2, 3] then [1, 2, 4]: the second owns only its last row, its path is two runs.
    let on = plan(&SHARED_IDS, &SHARED_POS, &SHARED_CU, &params(1.0, Some(8)));
    assert_eq!(on.qo_indptr, [0, 3, 4]);
    assert_eq!((on.run_indptr.as_slice(), on.run_start.as_slice()), ([0, 1, 3].as_slice(), [0, 3, 5].as_slice()));
    let runs: Vec<_> = on.path_runs(1).map(|r| (r.batch_start, r.compact_start, r.len)).collect();
    assert_eq!(runs, [(3, 0, 2), (5, 3, 1)]);
    assert_eq!(on.owned_rows(1), 3..4);
    // The identity plan: every sequence owns its rows, in one run.
    let off = plan(&SHARED_IDS, &SHARED_POS, &SHARED_CU, &params(0.0, None));
    assert_eq!((off.qo_indptr.as_slice(), off.run_start.as_slice()), (SHARED_CU.as_slice(), [0, 3].as_slice()));

    let mut rng = Rng(0xC0DE);
    let mut planner = Planner::new().unwrap();
    for case in 0..2000 {
        let (ids, pos, cu) = random_batch(&mut rng);
        let p = params([0.0, 0.85, 1.0][rng.below(3) as usize], [None, Some(8)][rng.below(2) as usize]);
        let view = planner.build(&ids, &pos, &cu, &p).unwrap();
        let owned = view.to_owned();
        check_layout(&owned, &format!("case {case}: ids {ids:?} pos {pos:?} cu {cu:?}"));
        assert_eq!((view.qo_indptr(), view.n_runs()), (&owned.qo_indptr[..], owned.run_start.len()));
        for s in 0..owned.n_seqs {
            assert!(view.path_runs(s).eq(owned.path_runs(s)) && view.owned_rows(s) == owned.owned_rows(s));
        }
    }
}
