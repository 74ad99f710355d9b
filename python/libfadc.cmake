# libfadc.so: the runtime of include/fadc.h as one shared library, what the
# Python package (python/fadc, docs/PYTHON.md) loads through ctypes.  It is
# the static runtime (fadc_runtime and what it links: fileio, support)
# linked whole, exporting only the fadc_* symbols of fadc.h
# (python/libfadc.map), so that nothing of the runtime's internals can
# clash with a host process's symbols.  No LLVM, no NVRTC: the CUDA driver
# is dlopen'ed, as always.  Built into BUILD/lib/.
#
# The installation (CMakeLists.txt, issue 25) makes fadc_shared in every
# build but the instrumented ones (sanitizers, fuzzing), which install
# nothing: this file, included after it, defines fadc_shared only there, so
# that the Python tests run on the instrumented runtime too.
if(NOT TARGET fadc_shared)
  add_library(fadc_shared SHARED ${CMAKE_SOURCE_DIR}/python/libfadc.map)
  set_target_properties(fadc_shared PROPERTIES
    OUTPUT_NAME fadc
    LINKER_LANGUAGE C
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib
    LINK_DEPENDS ${CMAKE_SOURCE_DIR}/python/libfadc.map)
  target_link_libraries(fadc_shared PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,fadc_runtime>")
  target_link_options(fadc_shared PRIVATE
    "-Wl,--version-script=${CMAKE_SOURCE_DIR}/python/libfadc.map")
  # Every symbol resolved at link time, but in the sanitizer builds, whose
  # runtime comes from the process (LD_PRELOAD, tests/tests.cmake).
  if(NOT FADC_SANITIZE AND NOT FADC_FUZZ)
    target_link_options(fadc_shared PRIVATE "-Wl,--no-undefined")
  endif()
endif()
