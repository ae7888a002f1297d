//! `PlanParams::from_env`: the deployment's switches (`RADIX_MLP_THRESHOLD`, `RADIX_MLP_PAD`,
//! `RADIX_MLP_GATE`) as the library reads them, defaults when unset (TEI's gate rule), the
//! library's message when invalid. One test in
//! its own binary, since it sets process-wide environment variables.
use radix_mlp::{Gate, PlanParams, Planner, Status};
use std::env;

const VARS: [&str; 3] = ["RADIX_MLP_THRESHOLD", "RADIX_MLP_PAD", "RADIX_MLP_GATE"];

#[test]
fn plan_params_from_env() {
    for var in VARS {
        env::remove_var(var);
    }
    // TEI's rule by default: the variables are TEI's.
    let tei = PlanParams { gate: Gate::Tei, ..PlanParams::default() };
    assert_eq!(PlanParams::from_env().unwrap(), tei);

    // Two sequences sharing [1, 2]: 4 distinct paths in 6 tokens, ratio 0.67.
    let (ids, pos, cu) = ([1, 2, 3, 1, 2, 4], [0, 1, 2, 0, 1, 2], [0, 3, 6]);
    let mut planner = Planner::new().unwrap();
    assert!(planner.build(&ids, &pos, &cu, &PlanParams::from_env().unwrap()).unwrap().use_radix());
    env::set_var("RADIX_MLP_THRESHOLD", "0.5");
    env::set_var("RADIX_MLP_PAD", "64");
    let params = PlanParams::from_env().unwrap();
    assert_eq!(params, PlanParams { threshold: 0.5, pad_multiple_of: Some(64), ..tei });
    assert!(!planner.build(&ids, &pos, &cu, &params).unwrap().use_radix(), "padded 64/6 >= 0.5: the gate declines");
    // TEI's rule judges the padded length: 0.85 declines 64/6 where the distinct rule takes 4/6.
    env::set_var("RADIX_MLP_THRESHOLD", "0.85");
    assert!(!planner.build(&ids, &pos, &cu, &PlanParams::from_env().unwrap()).unwrap().use_radix());
    env::set_var("RADIX_MLP_GATE", "distinct");
    assert!(planner.build(&ids, &pos, &cu, &PlanParams::from_env().unwrap()).unwrap().use_radix());
    env::remove_var("RADIX_MLP_GATE");
    env::set_var("RADIX_MLP_THRESHOLD", "1");
    let plan = planner.build(&ids, &pos, &cu, &PlanParams::from_env().unwrap()).unwrap();
    assert_eq!((plan.n_compact(), plan.n_compact_padded()), (4, 64));

    env::set_var("RADIX_MLP_PAD", "0");
    let err = PlanParams::from_env().unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("RADIX_MLP_PAD='0'"), "{err}");
    env::set_var("RADIX_MLP_PAD", "");
    env::set_var("RADIX_MLP_THRESHOLD", "fast");
    let err = PlanParams::from_env().unwrap_err();
    assert!(err.message.contains("RADIX_MLP_THRESHOLD='fast'"), "{err}");
    for var in VARS {
        env::remove_var(var);
    }
}
