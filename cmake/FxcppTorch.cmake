# Finds the LibTorch that fxcpp's torch layer, its extension and its C++ tests build against.
#
# Note [Which LibTorch]
# fxcpp builds against the torch of the Python it is built for (Python_EXECUTABLE), so that
# `pip install .` into an environment with torch 2.14.1 links the wheel's libtorch and
# `make` with Debian's /usr/bin/python3 links Debian's 1.13.1. cmake/torch_info.py asks that
# interpreter where the package keeps its headers and libraries, and which C++ ABI it was
# compiled with (_GLIBCXX_USE_CXX11_ABI must match, or std::string arguments break at link or
# run time). FXCPP_TORCH_DIR (a torch package folder) overrides it. A Debian torch keeps its
# headers in /usr/include and libraries in the multiarch folder; the package's include/
# folder links there, and find_library falls back to the system's paths.
#
# Defines:
#   FXCPP_TORCH_VERSION       e.g. 2.14.1
#   fxcpp_libtorch_cpu        INTERFACE target: ATen, c10, the dispatcher (libtorch_cpu, libc10)
#   fxcpp_libtorch_cpp        INTERFACE target: also the C++ frontend's headers (torch/torch.h)
#   fxcpp_libtorch_python     INTERFACE target: libtorch_python (for the extension)
#   FXCPP_TORCH_LIBDIR        the folder of libtorch_cpu (for RPATHs)
#   FXCPP_TORCH_CXX11_ABI     0 or 1
#   FXCPP_TORCH_INCLUDE_DIRS  torch's headers and the C++ frontend's (for the installed CMake package)
include_guard(GLOBAL)

if(NOT Python_EXECUTABLE)
  message(FATAL_ERROR "FxcppTorch: Python_EXECUTABLE is not set (the Python whose torch to build against)")
endif()
set(FXCPP_TORCH_DIR "" CACHE PATH "A torch package folder to build against (default: the torch of Python_EXECUTABLE)")

if(FXCPP_TORCH_DIR)
  set(_fx_torch_dir "${FXCPP_TORCH_DIR}")
  execute_process(COMMAND "${Python_EXECUTABLE}" -c
    "import sys; sys.path.insert(0, sys.argv[1]); import torch; print(torch.__version__.split('+')[0]); print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"
    "${FXCPP_TORCH_DIR}/.." OUTPUT_VARIABLE _fx_out RESULT_VARIABLE _fx_rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _fx_rc EQUAL 0)
    message(FATAL_ERROR "FxcppTorch: ${Python_EXECUTABLE} cannot import the torch in FXCPP_TORCH_DIR=${FXCPP_TORCH_DIR}")
  endif()
  string(REPLACE "\n" ";" _fx_out "${_fx_out}")
  list(GET _fx_out 0 FXCPP_TORCH_VERSION)
  list(GET _fx_out 1 _fx_abi)
  set(_fx_include "${FXCPP_TORCH_DIR}/include")
  set(_fx_lib "${FXCPP_TORCH_DIR}/lib")
else()
  execute_process(COMMAND "${Python_EXECUTABLE}" "${CMAKE_CURRENT_LIST_DIR}/torch_info.py"
    OUTPUT_VARIABLE _fx_out RESULT_VARIABLE _fx_rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _fx_rc EQUAL 0)
    message(FATAL_ERROR "FxcppTorch: cmake/torch_info.py failed under ${Python_EXECUTABLE}")
  endif()
  string(REPLACE "\n" ";" _fx_lines "${_fx_out}")
  foreach(_fx_line IN LISTS _fx_lines)
    if(_fx_line MATCHES "^([a-z0-9_]+)=(.*)$")
      set(_fx_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
    endif()
  endforeach()
  if(_fx_error)
    message(FATAL_ERROR "FxcppTorch: ${_fx_error}")
  endif()
  set(FXCPP_TORCH_VERSION "${_fx_version}")
  set(_fx_abi "${_fx_cxx11_abi}")
  set(_fx_torch_dir "${_fx_dir}")
endif()

# Libraries: the package's lib/ first (a wheel), then the system's (Debian).
set(_fx_hints)
if(_fx_lib)
  set(_fx_hints HINTS "${_fx_lib}" NO_DEFAULT_PATH)
endif()
unset(FXCPP_LIBTORCH_CPU CACHE)
unset(FXCPP_LIBC10 CACHE)
unset(FXCPP_LIBTORCH_PYTHON CACHE)
find_library(FXCPP_LIBTORCH_CPU torch_cpu ${_fx_hints} REQUIRED)
find_library(FXCPP_LIBC10 c10 ${_fx_hints} REQUIRED)
find_library(FXCPP_LIBTORCH_PYTHON torch_python ${_fx_hints})
get_filename_component(FXCPP_TORCH_LIBDIR "${FXCPP_LIBTORCH_CPU}" DIRECTORY)
set(FXCPP_TORCH_CXX11_ABI "${_fx_abi}")

set(_fx_includes)
set(_fx_api_include)
if(_fx_include)
  set(_fx_includes "${_fx_include}")
  set(_fx_api_include "${_fx_include}/torch/csrc/api/include")
else()
  find_path(_fx_api_include torch/torch.h PATHS /usr/include/torch/csrc/api/include REQUIRED)
endif()

add_library(fxcpp_libtorch_cpu INTERFACE)
target_link_libraries(fxcpp_libtorch_cpu INTERFACE "${FXCPP_LIBTORCH_CPU}" "${FXCPP_LIBC10}")
target_compile_definitions(fxcpp_libtorch_cpu INTERFACE _GLIBCXX_USE_CXX11_ABI=${_fx_abi})
if(_fx_includes)
  # SYSTEM: torch's headers are not ours to warn about.
  target_include_directories(fxcpp_libtorch_cpu SYSTEM INTERFACE ${_fx_includes})
endif()
# LibTorch 2.10 and newer need C++20 in its headers (concepts, <=>); fxcpp's own code is
# C++17 and compiles as C++20 where it includes them.
if(FXCPP_TORCH_VERSION VERSION_GREATER_EQUAL 2.10)
  target_compile_features(fxcpp_libtorch_cpu INTERFACE cxx_std_20)
endif()
add_library(fxcpp_libtorch_cpp INTERFACE)
target_link_libraries(fxcpp_libtorch_cpp INTERFACE fxcpp_libtorch_cpu)
target_include_directories(fxcpp_libtorch_cpp SYSTEM INTERFACE "${_fx_api_include}")
add_library(fxcpp_libtorch_python INTERFACE)
if(FXCPP_LIBTORCH_PYTHON)
  target_link_libraries(fxcpp_libtorch_python INTERFACE "${FXCPP_LIBTORCH_PYTHON}" fxcpp_libtorch_cpu)
  if(_fx_includes)
    target_include_directories(fxcpp_libtorch_python SYSTEM INTERFACE "${_fx_api_include}")
  endif()
endif()
set(FXCPP_TORCH_INCLUDE_DIRS ${_fx_includes} "${_fx_api_include}")
message(STATUS "fxcpp: LibTorch ${FXCPP_TORCH_VERSION} from ${FXCPP_TORCH_LIBDIR} (_GLIBCXX_USE_CXX11_ABI=${_fx_abi})")
