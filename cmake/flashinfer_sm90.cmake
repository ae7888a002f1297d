# FlashInfer's Hopper batch prefill (gpu/flashinfer_sm90.cu: CUTLASS code, FA3 style), included by
# CMakeLists.txt once radix_mlp_objects exists. It is compiled for sm_90a alone, so in a target of
# its own without CMake's architecture flags (CUDA_ARCHITECTURES OFF; CMake 3.25 knows no "90a"),
# whose objects join the library's. RMLP_FLASHINFER_SM90=AUTO builds it in a FlashInfer build whose
# architectures include 90 when scripts/setup.sh fetched the Hopper and CUTLASS headers; ON insists,
# OFF skips it (it costs about 70 s of one core: two instantiations, f16 and bf16). Sets
# RMLP_WITH_FLASHINFER_SM90 and, when ON, the target radix_mlp_sm90.
set(RMLP_FLASHINFER_SM90 AUTO CACHE STRING
  "FlashInfer's Hopper (sm_90a) prefill kernels: AUTO (FlashInfer, architecture 90 and the CUTLASS headers), ON or OFF")
set_property(CACHE RMLP_FLASHINFER_SM90 PROPERTY STRINGS AUTO ON OFF)
set(RMLP_WITH_FLASHINFER_SM90 OFF)
set(_rmlp_sm90_headers OFF)
if(RMLP_WITH_FLASHINFER AND EXISTS "${RMLP_FLASHINFER_DIR}/include/flashinfer/attention/hopper/prefill_sm90.cuh"
   AND EXISTS "${RMLP_FLASHINFER_DIR}/cutlass/cute/tensor.hpp")
  set(_rmlp_sm90_headers ON)
endif()
if(RMLP_FLASHINFER_SM90 STREQUAL "ON")
  if(NOT _rmlp_sm90_headers)
    message(FATAL_ERROR "RMLP_FLASHINFER_SM90=ON needs a FlashInfer build and the Hopper and CUTLASS headers in "
      "${RMLP_FLASHINFER_DIR} (scripts/setup.sh fetches them)")
  endif()
  set(RMLP_WITH_FLASHINFER_SM90 ON)
elseif(RMLP_FLASHINFER_SM90 STREQUAL "AUTO" AND _rmlp_sm90_headers AND CMAKE_CUDA_ARCHITECTURES MATCHES "(^|;)90")
  set(RMLP_WITH_FLASHINFER_SM90 ON)
endif()

if(RMLP_WITH_FLASHINFER_SM90)
  add_library(radix_mlp_sm90 OBJECT gpu/flashinfer_sm90.cu)
  set_target_properties(radix_mlp_sm90 PROPERTIES CUDA_ARCHITECTURES OFF POSITION_INDEPENDENT_CODE ON
    CUDA_VISIBILITY_PRESET hidden)
  # FlashInfer's newer libcu++ ahead of the toolkit's (-I); FlashInfer's and CUTLASS's headers as
  # system headers (-isystem: their warnings are theirs)
  target_include_directories(radix_mlp_sm90 PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}/ffi/include"
    "${CMAKE_CURRENT_SOURCE_DIR}" "${RMLP_FLASHINFER_DIR}/cccl")
  target_include_directories(radix_mlp_sm90 SYSTEM PRIVATE "${RMLP_FLASHINFER_DIR}/include"
    "${RMLP_FLASHINFER_DIR}/cutlass")
  target_compile_definitions(radix_mlp_sm90 PRIVATE RMLP_WITH_CUDA=1 RMLP_WITH_FLASHINFER=1)
  # CUTLASS's sm100 scheduler header, included on the way, carries annotations nvcc ignores (20012).
  target_compile_options(radix_mlp_sm90 PRIVATE --generate-code=arch=compute_90a,code=sm_90a ${RMLP_CUDA_WERROR}
    -Xcompiler=-Wall,-Wextra,-fvisibility=hidden -Xcompiler=-fexceptions --expt-relaxed-constexpr
    -diag-suppress=20012)
  target_compile_definitions(radix_mlp_objects PRIVATE RMLP_WITH_FLASHINFER_SM90=1)
  message(STATUS "radix_mlp: FlashInfer's Hopper prefill (sm_90a) built (RMLP_FLASHINFER_SM90=${RMLP_FLASHINFER_SM90})")
elseif(RMLP_WITH_FLASHINFER)
  message(STATUS "radix_mlp: no FlashInfer Hopper prefill (RMLP_FLASHINFER_SM90=${RMLP_FLASHINFER_SM90}, "
    "architectures ${CMAKE_CUDA_ARCHITECTURES}, Hopper/CUTLASS headers ${_rmlp_sm90_headers})")
endif()
