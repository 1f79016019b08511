# LibTorch for the importer, ds-reference and the tests that compare with PyTorch.
#
# By default the LibTorch 2.x inside the torch wheel that scripts/setup.sh installs in the
# project's virtual environment (.venv). The wheel's own CMake package wants its CUDA parts and
# fails to link, and pointing Torch_DIR at it mixes in Debian's 1.13 config (FACTS.md), so the
# CPU part is declared here by hand: headers, libtorch_cpu and libc10, C++20, run paths to the
# wheel's libraries and to the CUDA runtime its libtorch_cpu needs at load time.
#
#   DS_TORCH_ROOT   the wheel's torch/ folder (default: .venv/lib/python3*/site-packages/torch)
#
# Without the wheel, Debian's LibTorch 1.13 (find_package(Torch)) is used, with a warning: it
# cannot read archives saved by PyTorch 2.x. Sets TORCH_LIBRARIES (a target to link),
# DS_TORCH_VERSION and Torch_FOUND.
set(DS_TORCH_ROOT "" CACHE PATH "torch/ folder of a PyTorch 2.x wheel (default: the project's .venv)")

if(NOT DS_TORCH_ROOT)
  file(GLOB _ds_torch_roots "${PROJECT_SOURCE_DIR}/.venv/lib/python3*/site-packages/torch")
  if(_ds_torch_roots)
    list(GET _ds_torch_roots 0 _ds_root)
    set(DS_TORCH_ROOT "${_ds_root}" CACHE PATH "" FORCE)
  endif()
endif()

set(Torch_FOUND OFF)
if(DS_TORCH_ROOT AND EXISTS "${DS_TORCH_ROOT}/lib/libtorch_cpu.so")
  file(STRINGS "${DS_TORCH_ROOT}/version.py" _ds_version_line REGEX "^__version__")
  string(REGEX MATCH "[0-9]+\\.[0-9]+\\.[0-9]+" DS_TORCH_VERSION "${_ds_version_line}")
  get_filename_component(_ds_site "${DS_TORCH_ROOT}" DIRECTORY)
  file(GLOB _ds_cuda_libs "${_ds_site}/nvidia/cu*/lib")
  add_library(ds_libtorch INTERFACE IMPORTED)
  set_target_properties(ds_libtorch PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES
      "${DS_TORCH_ROOT}/include;${DS_TORCH_ROOT}/include/torch/csrc/api/include"
    INTERFACE_COMPILE_FEATURES cxx_std_20
    INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=1"
    INTERFACE_LINK_LIBRARIES
      "${DS_TORCH_ROOT}/lib/libtorch_cpu.so;${DS_TORCH_ROOT}/lib/libc10.so")
  set(_ds_rpath "${DS_TORCH_ROOT}/lib")
  foreach(_ds_lib ${_ds_cuda_libs})
    string(APPEND _ds_rpath ":${_ds_lib}")
  endforeach()
  # --disable-new-dtags: RPATH, not RUNPATH, so that libtorch_cpu's own dependencies
  # (libcudart.so.13, libcupti.so.13) are found through the executable's path too.
  set_property(TARGET ds_libtorch PROPERTY INTERFACE_LINK_OPTIONS
               "LINKER:-rpath,${_ds_rpath}" "LINKER:--disable-new-dtags")
  set(TORCH_LIBRARIES ds_libtorch)
  set(Torch_FOUND ON)
  message(STATUS "LibTorch ${DS_TORCH_VERSION} from ${DS_TORCH_ROOT}")
else()
  find_package(Torch CONFIG QUIET)
  if(Torch_FOUND)
    set(DS_TORCH_VERSION "${Torch_VERSION}")
    message(WARNING "LibTorch ${Torch_VERSION} from Debian: archives saved by PyTorch 2.x will "
            "not load; run scripts/setup.sh to install PyTorch 2.x in .venv and configure again")
  endif()
endif()
