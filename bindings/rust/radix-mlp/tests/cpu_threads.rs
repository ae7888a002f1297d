//! `set_cpu_threads` / `cpu_threads`: the CPU path's thread count, set and read back; 0 and counts
//! beyond what the CPU path can run refused with the library's message, the count unchanged. One test
//! in its own binary, since the count is process-wide.
use radix_mlp::Status;

#[test]
fn cpu_threads_set_and_refused() {
    let start = radix_mlp::cpu_threads();
    assert!(start >= 1);
    for n in [1, 2] {
        radix_mlp::set_cpu_threads(n).unwrap();
        assert_eq!(radix_mlp::cpu_threads(), n);
    }
    let err = radix_mlp::set_cpu_threads(0).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("rmlp_set_cpu_threads: n_threads is 0"), "{err}");
    let err = radix_mlp::set_cpu_threads(1 << 20).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("n_threads=1048576 exceeds the"), "{err}");
    let err = radix_mlp::set_cpu_threads(1 << 40).unwrap_err();
    assert!(err.message.contains("n_threads=1099511627776 exceeds 2^32-1"), "{err}");
    assert_eq!(radix_mlp::cpu_threads(), 2, "a refused count changes nothing");
    radix_mlp::set_cpu_threads(start).unwrap();
}
