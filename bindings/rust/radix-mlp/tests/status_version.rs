//! Library-level calls: version, CUDA device count, and the `Status` mapping of every
//! `RMLP_ERR_*` code (unknown codes kept).
use radix_mlp::{Error, Status};
use radix_mlp_sys as sys;

#[test]
fn version_matches_header() {
    let (major, minor, patch) = radix_mlp::version();
    assert_eq!((major, minor, patch), (sys::RMLP_VERSION_MAJOR, sys::RMLP_VERSION_MINOR, sys::RMLP_VERSION_PATCH));
    assert_eq!(radix_mlp::version_string(), format!("{major}.{minor}.{patch}"));
}

#[test]
fn cuda_device_count_reports_a_status() {
    let cuda_build = unsafe { sys::rmlp_build_flags() } & sys::RMLP_BUILD_CUDA != 0;
    match radix_mlp::cuda_device_count() {
        Ok(n) => assert!(cuda_build && n > 0),
        Err(Error { status: Status::Unsupported, message }) => {
            assert!(!cuda_build);
            assert!(message.contains("without CUDA"), "{message}");
        }
        Err(e) => assert!(cuda_build && matches!(e.status, Status::NoDevice | Status::Cuda), "{e}"),
    }
}

#[test]
fn status_codes_round_trip() {
    let all = [
        (sys::RMLP_ERR_INVALID_ARGUMENT, Status::InvalidArgument),
        (sys::RMLP_ERR_INVALID_SEQLENS, Status::InvalidSeqlens),
        (sys::RMLP_ERR_TOO_LARGE, Status::TooLarge),
        (sys::RMLP_ERR_OUT_OF_MEMORY, Status::OutOfMemory),
        (sys::RMLP_ERR_UNSUPPORTED, Status::Unsupported),
        (sys::RMLP_ERR_CUDA, Status::Cuda),
        (sys::RMLP_ERR_NO_DEVICE, Status::NoDevice),
        (sys::RMLP_ERR_INTERNAL, Status::Internal),
        (sys::RMLP_ERR_IO, Status::Io),
        (sys::RMLP_ERR_FORMAT, Status::Format),
        (sys::RMLP_ERR_MODEL, Status::Model),
        (-42, Status::Unknown(-42)),
    ];
    for (code, status) in all {
        assert_eq!(Status::from_code(code), status);
        assert_eq!(status.code(), code);
        assert!(!status.description().is_empty());
        assert!(status.to_string().contains(&code.to_string()));
    }
    assert_eq!(Status::Unknown(-42).description(), "unknown status");
}
