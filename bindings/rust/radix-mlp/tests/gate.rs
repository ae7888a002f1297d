//! The gate's two rules through the safe wrapper ([`Gate::Distinct`], [`Gate::Tei`]),
//! `RADIX_MLP_GATE` through `PlanParams::from_env` (its own binary: it sets the environment), and
//! the busy status's code.
use radix_mlp::{Gate, PlanParams, Planner, Status};
use std::env;

/// Two sequences of 8 sharing 3 tokens: N = 16, N' = 13, padded to 8 that is 16 rows.
const IDS: [u32; 16] = [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 9, 10, 11, 12, 13];
const POS: [u32; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7];
const CU: [u32; 3] = [0, 8, 16];

#[test]
fn the_rules_disagree_where_padding_crosses_the_threshold() {
    let mut planner = Planner::new().unwrap();
    let distinct = PlanParams { threshold: 0.85, pad_multiple_of: Some(8), gate: Gate::Distinct };
    let plan = planner.build(&IDS, &POS, &CU, &distinct).unwrap();
    assert!(plan.use_radix(), "13/16 < 0.85");
    assert_eq!((plan.n_compact(), plan.n_compact_padded()), (13, 16));
    let tei = PlanParams { gate: Gate::Tei, ..distinct };
    let plan = planner.build(&IDS, &POS, &CU, &tei).unwrap();
    assert!(!plan.use_radix(), "TEI's rule: padded 16/16 >= 0.85");
    assert_eq!((plan.n_distinct(), plan.n_compact()), (13, 16));
    let off = PlanParams { threshold: 1e-7, pad_multiple_of: None, gate: Gate::Tei };
    let plan = planner.build(&IDS, &POS, &CU, &off).unwrap();
    assert!(!plan.use_radix() && plan.n_distinct() == 16, "TEI's rule is off at <= 1e-6, without the trie");
    assert_eq!(PlanParams::default().gate, Gate::Distinct);
}

#[test]
fn gate_from_env_and_busy_status() {
    for var in ["RADIX_MLP_THRESHOLD", "RADIX_MLP_PAD"] {
        env::remove_var(var);
    }
    env::remove_var("RADIX_MLP_GATE");
    // The variables are TEI's: unset, they decide as TEI's code does; `distinct` opts out.
    assert_eq!(PlanParams::from_env().unwrap(), PlanParams { gate: Gate::Tei, ..PlanParams::default() });
    env::set_var("RADIX_MLP_GATE", "distinct");
    assert_eq!(PlanParams::from_env().unwrap(), PlanParams::default());
    env::set_var("RADIX_MLP_GATE", "tei");
    assert_eq!(PlanParams::from_env().unwrap(), PlanParams { gate: Gate::Tei, ..PlanParams::default() });
    env::set_var("RADIX_MLP_GATE", "padded");
    let err = PlanParams::from_env().unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("RADIX_MLP_GATE='padded' is neither 'distinct'"), "{err}");
    env::remove_var("RADIX_MLP_GATE");

    assert_eq!(Status::from_code(-12), Status::Busy);
    assert_eq!(Status::Busy.code(), -12);
    assert_eq!(Status::Busy.description(), "handle in use by another call");
}
