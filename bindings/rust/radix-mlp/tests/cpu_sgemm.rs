//! `cpu_sgemm`: which library the CPU path's f32 GEMMs run, with the library's account of why, as
//! the variable left it (unset in this test binary: `auto`). One test in its own binary, since the
//! choice is process-wide and made once.
use radix_mlp::CpuSgemm;

#[test]
fn cpu_sgemm_answers_and_says_why() {
    std::env::remove_var("RADIX_MLP_CPU_SGEMM");
    let (kind, detail) = radix_mlp::cpu_sgemm().unwrap();
    assert!(detail.contains("OpenBLAS"), "{detail}");
    assert!(detail.contains("auto"), "{detail}");
    match kind {
        CpuSgemm::OpenBlas => assert!(detail.starts_with("OpenBLAS's sgemm"), "{detail}"),
        CpuSgemm::OneDnn => assert!(detail.starts_with("oneDNN's sgemm") && detail.contains("this CPU runs AVX"), "{detail}"),
    }
    assert_eq!(radix_mlp::cpu_sgemm().unwrap(), (kind, detail), "the choice is kept");
}
