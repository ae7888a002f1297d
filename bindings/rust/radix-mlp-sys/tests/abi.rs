//! ABI checks of the raw crate against the linked libradix_mlp: the version constants agree
//! with the crate version and with the binary, the `#[repr(C)]` structs have the C layout
//! (sizes and offsets below were read from `radix_mlp.h` with a C program using
//! `sizeof`/`offsetof`), and every status has a description, the enum's codes exactly.
use core::ffi::CStr;
use core::mem::{align_of, offset_of, size_of};
use radix_mlp_sys::*;

#[test]
fn version_constants_match_crate_version() {
    let parts: Vec<u32> = env!("CARGO_PKG_VERSION")
        .split(['.', '-', '+'])
        .take(3)
        .map(|p| p.parse().expect("numeric version part"))
        .collect();
    assert_eq!(parts, [RMLP_VERSION_MAJOR, RMLP_VERSION_MINOR, RMLP_VERSION_PATCH]);
    assert_eq!(RMLP_VERSION, (parts[0] << 16) | (parts[1] << 8) | parts[2]);
}

#[test]
fn linked_library_matches_header() {
    assert_eq!(unsafe { rmlp_version() }, RMLP_VERSION);
    let s = unsafe { CStr::from_ptr(rmlp_version_string()) }.to_str().unwrap();
    assert_eq!(s, format!("{RMLP_VERSION_MAJOR}.{RMLP_VERSION_MINOR}.{RMLP_VERSION_PATCH}"));
}

#[test]
#[cfg(target_pointer_width = "64")]
fn struct_layout_matches_c() {
    assert_eq!((size_of::<rmlp_plan_params>(), align_of::<rmlp_plan_params>()), (32, 8)); // 24 in 0.1.0
    assert_eq!(offset_of!(rmlp_plan_params, struct_size), 0);
    assert_eq!(offset_of!(rmlp_plan_params, pad), 4);
    assert_eq!(offset_of!(rmlp_plan_params, pad_multiple_of), 8);
    assert_eq!(offset_of!(rmlp_plan_params, threshold), 16);
    assert_eq!(offset_of!(rmlp_plan_params, gate), 24);

    assert_eq!((size_of::<rmlp_plan>(), align_of::<rmlp_plan>()), (136, 8)); // 88 in 0.1.0
    assert_eq!(offset_of!(rmlp_plan, n_compact_padded), 16);
    assert_eq!(offset_of!(rmlp_plan, use_radix), 20);
    assert_eq!(offset_of!(rmlp_plan, compact_ratio), 24);
    assert_eq!(offset_of!(rmlp_plan, build_us), 32);
    assert_eq!(offset_of!(rmlp_plan, fold_gather), 40);
    assert_eq!(offset_of!(rmlp_plan, compact_parent), 72);
    assert_eq!(offset_of!(rmlp_plan, cu_seqlens), 80);
    assert_eq!(offset_of!(rmlp_plan, planner), 88);
    assert_eq!(offset_of!(rmlp_plan, generation), 96);
    assert_eq!(offset_of!(rmlp_plan, qo_indptr), 104);
    assert_eq!(offset_of!(rmlp_plan, n_runs), 112);
    assert_eq!(offset_of!(rmlp_plan, run_indptr), 120);
    assert_eq!(offset_of!(rmlp_plan, run_start), 128);

    // 96 in 0.1.0: `layout` sits in what was the padding after `max_seqlen`; 152 before 0.3.
    assert_eq!((size_of::<rmlp_attention_args>(), align_of::<rmlp_attention_args>()), (160, 8));
    assert_eq!(offset_of!(rmlp_attention_args, scale), 24);
    assert_eq!(offset_of!(rmlp_attention_args, cu_seqlens), 32);
    assert_eq!(offset_of!(rmlp_attention_args, stream), 72);
    assert_eq!(offset_of!(rmlp_attention_args, cu_seqlens_device), 80);
    assert_eq!(offset_of!(rmlp_attention_args, max_seqlen), 88);
    assert_eq!(offset_of!(rmlp_attention_args, layout), 92);
    assert_eq!(offset_of!(rmlp_attention_args, n_compact), 96);
    assert_eq!(offset_of!(rmlp_attention_args, qo_indptr), 104);
    assert_eq!(offset_of!(rmlp_attention_args, kv_indptr), 112);
    assert_eq!(offset_of!(rmlp_attention_args, kv_indices), 120);
    assert_eq!(offset_of!(rmlp_attention_args, qo_indptr_device), 128);
    assert_eq!(offset_of!(rmlp_attention_args, kv_indptr_device), 136);
    assert_eq!(offset_of!(rmlp_attention_args, kv_indices_device), 144);
    assert_eq!(offset_of!(rmlp_attention_args, sliding_window), 152);
    assert_eq!(offset_of!(rmlp_attention_args, softcap), 156);
    assert_eq!((size_of::<rmlp_layer_attention>(), align_of::<rmlp_layer_attention>()), (12, 4));
    assert_eq!(offset_of!(rmlp_layer_attention, sliding_window), 4);
    assert_eq!(offset_of!(rmlp_layer_attention, softcap), 8);

    // 8 before `cache_bytes`, 16 before `gpu_attention`.
    assert_eq!((size_of::<rmlp_context_params>(), align_of::<rmlp_context_params>()), (24, 8));
    assert_eq!(offset_of!(rmlp_context_params, attention_space), 4);
    assert_eq!(offset_of!(rmlp_context_params, cache_bytes), 8);
    assert_eq!(offset_of!(rmlp_context_params, gpu_attention), 16);

    assert_eq!((size_of::<rmlp_gpu_stats>(), align_of::<rmlp_gpu_stats>()), (576, 8));
    assert_eq!(offset_of!(rmlp_gpu_stats, cuda), 4);
    assert_eq!(offset_of!(rmlp_gpu_stats, attention), 8);
    assert_eq!(offset_of!(rmlp_gpu_stats, flashinfer), 12);
    assert_eq!(offset_of!(rmlp_gpu_stats, full_kv_paged), 13);
    assert_eq!(offset_of!(rmlp_gpu_stats, decode_flashinfer), 16);
    assert_eq!(offset_of!(rmlp_gpu_stats, flashinfer_full), 24);
    assert_eq!(offset_of!(rmlp_gpu_stats, reference_compact), 64);
    assert_eq!(offset_of!(rmlp_gpu_stats, plan_errors), 72);
    assert_eq!(offset_of!(rmlp_gpu_stats, fallback_plan_error), 80);
    assert_eq!(offset_of!(rmlp_gpu_stats, fallback_launcher), 120);
    assert_eq!(offset_of!(rmlp_gpu_stats, first_plan_error), 128);
    assert_eq!(offset_of!(rmlp_gpu_stats, sm90), 528);
    assert_eq!(offset_of!(rmlp_gpu_stats, sm90_fallbacks), 552);
    assert_eq!(offset_of!(rmlp_gpu_stats, nonfinite_outputs), 560);
    assert_eq!(offset_of!(rmlp_gpu_stats, nonfinite_row), 568);
    assert_eq!(offset_of!(rmlp_gpu_stats, nonfinite_col), 572);

    assert_eq!((size_of::<rmlp_cpu_profile>(), align_of::<rmlp_cpu_profile>()), (56, 8));
    assert_eq!(offset_of!(rmlp_cpu_profile, cpu), 4);
    assert_eq!(offset_of!(rmlp_cpu_profile, forwards), 8);
    assert_eq!(offset_of!(rmlp_cpu_profile, total_ms), 16);
    assert_eq!(offset_of!(rmlp_cpu_profile, gather_ms), 48);

    assert_eq!((size_of::<rmlp_cache_stats>(), align_of::<rmlp_cache_stats>()), (88, 8));
    assert_eq!(offset_of!(rmlp_cache_stats, batches), 0);
    assert_eq!(offset_of!(rmlp_cache_stats, bypassed), 8);
    assert_eq!(offset_of!(rmlp_cache_stats, lookups), 16);
    assert_eq!(offset_of!(rmlp_cache_stats, hit_tokens), 24);
    assert_eq!(offset_of!(rmlp_cache_stats, computed_tokens), 32);
    assert_eq!(offset_of!(rmlp_cache_stats, evicted_tokens), 40);
    assert_eq!(offset_of!(rmlp_cache_stats, slots), 48);
    assert_eq!(offset_of!(rmlp_cache_stats, slots_used), 56);
    assert_eq!(offset_of!(rmlp_cache_stats, bytes_per_slot), 64);
    assert_eq!(offset_of!(rmlp_cache_stats, bytes_budget), 72);
    assert_eq!(offset_of!(rmlp_cache_stats, bytes_in_use), 80);

    assert_eq!((size_of::<rmlp_generate_params>(), align_of::<rmlp_generate_params>()), (12, 4));
    assert_eq!(offset_of!(rmlp_generate_params, max_new_tokens), 4);
    assert_eq!(offset_of!(rmlp_generate_params, shared_prefix_attention), 8);

    assert_eq!((size_of::<rmlp_generate_stats>(), align_of::<rmlp_generate_stats>()), (56, 8));
    assert_eq!(offset_of!(rmlp_generate_stats, n_active), 8);
    assert_eq!(offset_of!(rmlp_generate_stats, rows_computed), 32);
    assert_eq!(offset_of!(rmlp_generate_stats, step_ms), 40);
    assert_eq!(offset_of!(rmlp_generate_stats, attention_ms), 48);
}

#[test]
fn default_params_match_constants() {
    let p = unsafe { rmlp_plan_default_params() };
    assert_eq!(p.struct_size as usize, size_of::<rmlp_plan_params>());
    assert!(!p.pad);
    assert_eq!(p.pad_multiple_of, RMLP_DEFAULT_PAD_MULTIPLE);
    assert_eq!(p.threshold, RMLP_DEFAULT_THRESHOLD);
    assert_eq!(p.gate, RMLP_GATE_DISTINCT);
    let c = unsafe { rmlp_context_default_params() };
    assert_eq!(c.struct_size as usize, size_of::<rmlp_context_params>());
    assert_eq!(c.attention_space, RMLP_ATTENTION_FULL);
    assert_eq!(c.cache_bytes, 0);
    assert_eq!(c.gpu_attention, RMLP_GPU_ATTENTION_AUTO);
    let g = unsafe { rmlp_generate_default_params() };
    assert_eq!(g.struct_size as usize, size_of::<rmlp_generate_params>());
    assert_eq!(g.max_new_tokens, 256);
    assert!(g.shared_prefix_attention);
}

#[test]
fn status_strings_are_non_empty() {
    let codes: Vec<rmlp_status> = rmlp_status_code::ALL.iter().map(|&code| code.status()).chain([-1000]).collect();
    let strings: Vec<String> =
        codes.iter().map(|&c| unsafe { CStr::from_ptr(rmlp_status_string(c)) }.to_str().unwrap().to_owned()).collect();
    assert!(strings.iter().all(|s| !s.is_empty()), "{strings:?}");
    // The known codes have distinct descriptions.
    let mut known = strings[..codes.len() - 1].to_vec();
    known.sort();
    known.dedup();
    assert_eq!(known.len(), codes.len() - 1, "{strings:?}");
}

/// `rmlp_status_code` (the header's enum of the codes) is exactly the set of codes the library
/// describes, and each `RMLP_*` constant is its enumerator's value.
#[test]
fn status_enum_is_every_code_the_library_knows() {
    assert_eq!(size_of::<rmlp_status_code>(), size_of::<rmlp_status>());
    assert_eq!(rmlp_status_code::RMLP_ERR_FULL.status(), RMLP_ERR_FULL);
    assert_eq!(rmlp_status_code::RMLP_ERR_FULL as rmlp_status, -13);
    let unknown = unsafe { CStr::from_ptr(rmlp_status_string(-1000)) };
    for status in -64..=64 {
        let described = unsafe { CStr::from_ptr(rmlp_status_string(status)) } != unknown;
        let in_enum = rmlp_status_code::ALL.iter().any(|&code| code.status() == status);
        assert_eq!(described, in_enum, "status {status}: described by the library {described}, in the enum {in_enum}");
    }
}

#[test]
fn last_error_is_set_and_cleared() {
    let mut out = core::mem::MaybeUninit::<rmlp_plan>::uninit();
    let mut planner = core::ptr::null_mut();
    assert_eq!(unsafe { rmlp_planner_create(&mut planner) }, RMLP_OK);
    // One token in one sequence, with the given cu_seqlens.
    let mut build = |cu: [u32; 2]| unsafe {
        rmlp_plan_build(
            planner,
            [0u32].as_ptr(),
            [0u32].as_ptr(),
            1,
            cu.as_ptr(),
            1,
            core::ptr::null(),
            out.as_mut_ptr(),
        )
    };
    assert_eq!(build([1, 1]), RMLP_ERR_INVALID_SEQLENS);
    let msg = unsafe { CStr::from_ptr(rmlp_last_error()) }.to_str().unwrap().to_owned();
    assert!(msg.contains("cu_seqlens[0]=1"), "{msg}");
    assert_eq!(build([0, 1]), RMLP_OK);
    assert_eq!(unsafe { CStr::from_ptr(rmlp_last_error()) }.to_bytes(), b"");
    unsafe { rmlp_planner_free(planner) };
    unsafe { rmlp_planner_free(core::ptr::null_mut()) };
}
