# The CUDA architectures to build, chosen before enable_language(CUDA) (included by CMakeLists.txt
# once check_language(CUDA) found a compiler), where the configure does not name them itself
# (-DCMAKE_CUDA_ARCHITECTURES=... or CMake's CUDAARCHS: they win, as in any CMake project):
#   CUDA_COMPUTE_CAP   (the environment, as TEI's Dockerfile-cuda-all passes it, or -D; cached): one
#                      architecture, e.g. 80 or 90 ("9.0" too): SASS and PTX for it alone. The GPU
#                      window's scripts build this way for the device's own capability.
#   otherwise          RMLP_CUDA_DEFAULT_ARCHITECTURES (75 80 86 89 90 100 120, TEI's images' set and
#                      Ada's 89) where the compiler has them (`nvcc --list-gpu-arch`; CUDA 12.0-12.7
#                      have no 100/120, CUDA 13 no longer has anything below 75): SASS for each, and
#                      PTX for the newest, which newer devices compile at load time.
# FlashInfer's sm_90a kernels are added for 90 only, by cmake/flashinfer_sm90.cmake. Sets
# CMAKE_CUDA_ARCHITECTURES and RMLP_CUDA_ARCHITECTURES_HOW (what chose them, for the configure line).
set(RMLP_CUDA_DEFAULT_ARCHITECTURES 75 80 86 89 90 100 120 CACHE STRING
  "The CUDA architectures built when neither CMAKE_CUDA_ARCHITECTURES nor CUDA_COMPUTE_CAP names them")

# _rmlp_cuda_compiler_archs(OUT): the architectures the compiler names (nvcc --list-gpu-arch:
# compute_75 ...), as numbers; empty where it cannot say (clang).
function(_rmlp_cuda_compiler_archs out)
  execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --list-gpu-arch OUTPUT_VARIABLE _list ERROR_QUIET
    RESULT_VARIABLE _rc)
  set(_archs "")
  if(_rc EQUAL 0)
    string(REGEX MATCHALL "compute_[0-9]+" _found "${_list}")
    foreach(_a IN LISTS _found)
      string(REPLACE "compute_" "" _a "${_a}")
      list(APPEND _archs ${_a})
    endforeach()
  endif()
  set(${out} "${_archs}" PARENT_SCOPE)
endfunction()

# The environment's value is kept in the cache, so that a later configure (cmake --build reruns it
# when a CMake file changed) builds the same; -DCUDA_COMPUTE_CAP= goes back to the default set.
set(CUDA_COMPUTE_CAP "" CACHE STRING "One CUDA architecture to build (80, 90, ...; TEI's variable); empty: the default set")
if(DEFINED ENV{CUDA_COMPUTE_CAP} AND NOT "$ENV{CUDA_COMPUTE_CAP}" STREQUAL "")
  set(CUDA_COMPUTE_CAP "$ENV{CUDA_COMPUTE_CAP}" CACHE STRING "" FORCE)
endif()
if(DEFINED CMAKE_CUDA_ARCHITECTURES OR (DEFINED ENV{CUDAARCHS} AND NOT "$ENV{CUDAARCHS}" STREQUAL ""))
  set(RMLP_CUDA_ARCHITECTURES_HOW "CMAKE_CUDA_ARCHITECTURES") # or CMake's own CUDAARCHS
  if(NOT "${CUDA_COMPUTE_CAP}" STREQUAL "")
    message(STATUS "radix_mlp: CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP} ignored: CMAKE_CUDA_ARCHITECTURES "
      "(${CMAKE_CUDA_ARCHITECTURES}) is set")
  endif()
else()
  _rmlp_cuda_compiler_archs(_rmlp_known)
  if(NOT "${CUDA_COMPUTE_CAP}" STREQUAL "")
    string(REPLACE "." "" _rmlp_cap "${CUDA_COMPUTE_CAP}")
    if(NOT _rmlp_cap MATCHES "^[1-9][0-9]+$")
      message(FATAL_ERROR "CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP}: expected a compute capability such as 80 or 90 "
        "(or 8.0, 9.0)")
    endif()
    if(_rmlp_known AND NOT _rmlp_cap IN_LIST _rmlp_known)
      list(JOIN _rmlp_known " " _rmlp_known_text)
      message(FATAL_ERROR "CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP}: ${CMAKE_CUDA_COMPILER} has no architecture "
        "${_rmlp_cap} (it has ${_rmlp_known_text})")
    endif()
    set(CMAKE_CUDA_ARCHITECTURES ${_rmlp_cap})
    set(RMLP_CUDA_ARCHITECTURES_HOW "CUDA_COMPUTE_CAP")
  else()
    set(_rmlp_archs "")
    set(_rmlp_dropped "")
    foreach(_a IN LISTS RMLP_CUDA_DEFAULT_ARCHITECTURES)
      if(NOT _rmlp_known OR _a IN_LIST _rmlp_known)
        list(APPEND _rmlp_archs ${_a})
      else()
        list(APPEND _rmlp_dropped ${_a})
      endif()
    endforeach()
    if(NOT _rmlp_archs)
      message(FATAL_ERROR "${CMAKE_CUDA_COMPILER} has none of the architectures ${RMLP_CUDA_DEFAULT_ARCHITECTURES}: "
        "name some with CUDA_COMPUTE_CAP or -DCMAKE_CUDA_ARCHITECTURES")
    endif()
    # SASS (-real) for all but the newest, which also gets its PTX (CMake's plain number: both)
    list(POP_BACK _rmlp_archs _rmlp_newest)
    list(TRANSFORM _rmlp_archs APPEND "-real")
    list(APPEND _rmlp_archs ${_rmlp_newest})
    set(CMAKE_CUDA_ARCHITECTURES ${_rmlp_archs})
    set(RMLP_CUDA_ARCHITECTURES_HOW "the default set")
    if(_rmlp_dropped)
      string(APPEND RMLP_CUDA_ARCHITECTURES_HOW ", without ${_rmlp_dropped}, which this compiler lacks")
    endif()
  endif()
endif()
