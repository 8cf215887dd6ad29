# kernels/cuda: the CUDA backend's library (dcm_kernels_cuda), included by the
# top-level CMakeLists.txt. Always built: its host files (.c, no CUDA header)
# probe the machine through dlopen and answer "no CUDA in this build" when the
# option is off. With DCMSERVE_CUDA on, the .cu files are compiled by nvcc for
# sm_80 and sm_90 (+ compute_90 PTX for later GPUs).
#
# Linking: the CUDA runtime is linked statically (cudart_static, which opens
# libcuda.so.1 itself at the first call), and cuBLAS / cuBLASLt / cuDNN are
# opened with dlopen by kn_cuda_probe.c, so the binary starts, and says why,
# on a machine without the driver or those libraries (docs/gpu.md).
set(DCMSERVE_CUDA AUTO CACHE STRING "CUDA backend: AUTO (on when nvcc is found), ON or OFF")
set_property(CACHE DCMSERVE_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${DCMSERVE_CUDA}" _dcm_cuda)
if(NOT _dcm_cuda MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "DCMSERVE_CUDA must be AUTO, ON or OFF (got '${DCMSERVE_CUDA}')")
endif()
set(DCM_CUDA_ON OFF)
if(MS_FUZZ AND _dcm_cuda STREQUAL "AUTO")
  set(_dcm_cuda OFF) # the fuzz build is clang + libFuzzer, host code only
endif()
if(NOT _dcm_cuda STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(DCM_NVCC nvcc HINTS /usr/local/cuda/bin)
    if(DCM_NVCC)
      set(CMAKE_CUDA_COMPILER ${DCM_NVCC})
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(DCM_CUDA_ON ON)
  elseif(_dcm_cuda STREQUAL "ON")
    message(FATAL_ERROR "DCMSERVE_CUDA=ON but no working nvcc was found "
                        "(set CMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)")
  else()
    message(STATUS "dcmserve: nvcc not found, CUDA backend off (DCMSERVE_CUDA=AUTO)")
  endif()
endif()

set(_dcm_cuda_globs)
if(DCM_CUDA_ON)
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    # SASS for A100 (sm_80) and H100/H200 (sm_90), PTX of sm_90 for later GPUs.
    set(CMAKE_CUDA_ARCHITECTURES 80-real 90)
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
  find_package(CUDAToolkit REQUIRED)
  if(CUDAToolkit_VERSION_MAJOR LESS 13)
    message(WARNING "dcmserve targets CUDA 13; found ${CUDAToolkit_VERSION}")
  endif()
  set(_dcm_cuda_globs ${CMAKE_SOURCE_DIR}/kernels/cuda/*.cu)
  message(STATUS "dcmserve: CUDA backend ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES})")
endif()

dcm_layer(dcm_kernels_cuda kernels/cuda DEPS dcm_kernels ${CMAKE_DL_LIBS} GLOBS ${_dcm_cuda_globs})
if(DCM_CUDA_ON)
  math(EXPR _dcm_cuda_rt "${CUDAToolkit_VERSION_MAJOR} * 1000 + ${CUDAToolkit_VERSION_MINOR} * 10")
  string(REPLACE ";" " " _dcm_archs "${CMAKE_CUDA_ARCHITECTURES}")
  target_compile_definitions(dcm_kernels_cuda PUBLIC DCMSERVE_HAVE_CUDA=1
    PRIVATE KN_CUDA_RUNTIME_VERSION=${_dcm_cuda_rt} "KN_CUDA_ARCHS=\"${_dcm_archs}\""
    "KN_CUDA_LIBDIR=\"${CUDAToolkit_LIBRARY_DIR}\"")
  target_include_directories(dcm_kernels_cuda PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(dcm_kernels_cuda PUBLIC CUDA::cudart_static)
  target_compile_options(dcm_kernels_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings -Xcompiler=-Wall,-Wextra -lineinfo>)
endif()

# The fused DICOM kernel's bandwidth benchmark (bench/gpu/run.sh runs it).
if(DCM_CUDA_ON)
  add_executable(bench_gpu_dicom ${CMAKE_SOURCE_DIR}/bench/gpu/bench_gpu_dicom.c)
  target_link_libraries(bench_gpu_dicom dcm_kernels_cuda)
endif()
