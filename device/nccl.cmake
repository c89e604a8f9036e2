# Finds CUDA's runtime (find_package(CUDAToolkit)) and NCCL: NCCL_ROOT, $NCCL_ROOT,
# $NCCL_HOME, the CUDA toolkit's own directories, or PyTorch's pip package
# (site-packages/nvidia/nccl, whose library is only libnccl.so.2). Sets HPREF_NCCL_FOUND,
# NCCL_INCLUDE_DIR and NCCL_LIBRARY. Used by device/CMakeLists.txt and device/gpu_check.
find_package(CUDAToolkit QUIET)
set(_hpref_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} $ENV{NCCL_HOME})
if(CUDAToolkit_FOUND)
  list(APPEND _hpref_nccl_hints ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR})
endif()
find_package(Python3 QUIET COMPONENTS Interpreter)
if(Python3_FOUND)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import nvidia.nccl as m; print(list(m.__path__)[0])"
                  OUTPUT_VARIABLE _hpref_pip_nccl OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_hpref_pip_nccl)
    list(APPEND _hpref_nccl_hints ${_hpref_pip_nccl})
  endif()
endif()
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_hpref_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_hpref_nccl_hints} PATH_SUFFIXES lib lib64)
if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  set(HPREF_NCCL_FOUND TRUE)
else()
  set(HPREF_NCCL_FOUND FALSE)
endif()
