# Test registration: one ctest per unit test and per golden .ir file, so
# that `ctest -j` parallelises and a failure names its file.  Tests exit 77
# to say "skipped" (no GPU, no CUDA toolkit).

file(GLOB UNIT_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/unit/test_*.c)
foreach(src ${UNIT_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit)
  target_link_libraries(${name} PRIVATE fadc_frontend fadc_passes fadc_bench fadc_runtime fadc_ir)
  add_test(NAME unit/${name} COMMAND ${name})
  # Model-zoo tests run the float64 interpreter on whole models: `slow`,
  # left out of the sanitizer run (tests/run-all.sh) to keep CI in time.
  # test_codegen_layout interprets resnet18's and fcn_resnet's kernel IR
  # twice (12 s, 426 s under ASan on 2 cores): slow too.
  set(labels unit)
  if(name MATCHES "zoo" OR name STREQUAL "test_codegen_layout")
    set(labels "unit;slow")
  endif()
  set_tests_properties(unit/${name} PROPERTIES LABELS "${labels}" SKIP_RETURN_CODE 77
                       ENVIRONMENT "FADC_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache;FADC_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endforeach()
# test_codegen_gemm again with the 512-bit GEMM tiles of AVX-512 targets
# (FADC_GEMM_VBYTES=64: two 256-bit registers per vector on an AVX2
# machine), so that their code is checked against the interpreter on any CPU.
add_test(NAME unit/test_codegen_gemm_512 COMMAND test_codegen_gemm)
set_tests_properties(unit/test_codegen_gemm_512 PROPERTIES LABELS unit SKIP_RETURN_CODE 77
                     ENVIRONMENT "FADC_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache;FADC_SOURCE_DIR=${CMAKE_SOURCE_DIR};FADC_GEMM_VBYTES=64")
# test_codegen_plan in two halves: its hand-made plans (unit) and the plan
# simulator over every zoo plan at reduced size, twice with recomputation
# forced (10 s, ~170 s under ASan on 2 cores: slow).
set_tests_properties(unit/test_codegen_plan PROPERTIES
                     ENVIRONMENT "FADC_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache;FADC_SOURCE_DIR=${CMAKE_SOURCE_DIR};PLAN_PART=hand")
add_test(NAME unit/test_codegen_plan_zoo COMMAND test_codegen_plan)
set_tests_properties(unit/test_codegen_plan_zoo PROPERTIES LABELS "unit;slow" SKIP_RETURN_CODE 77
                     ENVIRONMENT "FADC_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache;FADC_SOURCE_DIR=${CMAKE_SOURCE_DIR};PLAN_PART=zoo")
# The zoo half's recomputation runs at the default memory goal (codegen/plan.c):
# again without a goal (FADC_MEMORY_GOAL=0, every candidate), so both modes'
# plans are simulated.
add_test(NAME unit/test_codegen_plan_zoo_nogoal COMMAND test_codegen_plan)
set_tests_properties(unit/test_codegen_plan_zoo_nogoal PROPERTIES LABELS "unit;slow" SKIP_RETURN_CODE 77
                     ENVIRONMENT "FADC_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache;FADC_SOURCE_DIR=${CMAKE_SOURCE_DIR};PLAN_PART=zoo;FADC_MEMORY_GOAL=0")
# test_codegen_models again with recomputation (codegen/plan.c, cg_remat)
# forced at the reduced sizes (FADC_REMAT_MIN=1: every value of at least a
# byte, not 1 MiB): the rewritten programs' values against the interpreter.
add_test(NAME unit/test_codegen_models_remat COMMAND test_codegen_models)
set_tests_properties(unit/test_codegen_models_remat PROPERTIES LABELS unit SKIP_RETURN_CODE 77
                     ENVIRONMENT "FADC_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache;FADC_SOURCE_DIR=${CMAKE_SOURCE_DIR};FADC_REMAT_MIN=1")
# test_backend_ops: every op of ir/ops.def at random shapes, compiled (CPU;
# CUDA compile-checked) against the interpreter; it compiles artifacts, so
# it links the harness as the codegen tests do.  Again with zero-size shapes
# (issue 18): every op must pass with them too.
target_link_libraries(test_backend_ops PRIVATE fadc_harness fadc_codegen)
add_test(NAME unit/test_backend_ops_zero COMMAND test_backend_ops)
set_tests_properties(unit/test_backend_ops_zero PROPERTIES LABELS unit
                     ENVIRONMENT "FADC_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache;FADC_SOURCE_DIR=${CMAKE_SOURCE_DIR};FADC_BACKEND_OPS_ZERO=1")
# test_cuda_special compiles codegen/cuda_special.h, the CUDA backend's
# digamma and trigamma, as host C: contracted as on the device (NVRTC runs
# with --fmad=false), so only the header's explicit fmaf/fma fuse.
target_include_directories(test_cuda_special PRIVATE ${CMAKE_SOURCE_DIR}/codegen)
target_compile_options(test_cuda_special PRIVATE -ffp-contract=off)

# The layering of docs/ARCHITECTURE.md: every module's includes against the
# modules it may depend on (tests/layering.sh; grep, no build).
add_test(NAME layering COMMAND bash ${CMAKE_SOURCE_DIR}/tests/layering.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(layering PROPERTIES LABELS unit)

# Golden tests: each file carries "# RUN:" lines (tests/lit.sh).
file(GLOB GOLDEN_TESTS CONFIGURE_DEPENDS
     ${CMAKE_SOURCE_DIR}/tests/parse/*.ir ${CMAKE_SOURCE_DIR}/tests/errors/*.ir
     ${CMAKE_SOURCE_DIR}/tests/exec/*.ir ${CMAKE_SOURCE_DIR}/tests/cli/*.sh
     ${CMAKE_SOURCE_DIR}/tests/passes/*.ir
     ${CMAKE_SOURCE_DIR}/tests/bench/*.sh
     ${CMAKE_SOURCE_DIR}/tests/models/*.ir ${CMAKE_SOURCE_DIR}/tests/cpu/*.sh
     ${CMAKE_SOURCE_DIR}/tests/onnx/*.sh
     ${CMAKE_SOURCE_DIR}/tests/gpu/*.sh)
foreach(f ${GOLDEN_TESTS})
  file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR}/tests ${f})
  add_test(NAME ${rel} COMMAND bash ${CMAKE_SOURCE_DIR}/tests/lit.sh ${f})
  set(labels golden)
  if(rel MATCHES "zoo")
    set(labels "golden;slow")
  elseif(rel MATCHES "^gpu/")
    set(labels "golden;cuda")
  endif()
  set_tests_properties(${rel} PROPERTIES LABELS "${labels}" SKIP_RETURN_CODE 77
    ENVIRONMENT "FADC=$<TARGET_FILE:fadc>;FADC_BENCH=$<TARGET_FILE:fadc-bench>;FADC_SOURCE_DIR=${CMAKE_SOURCE_DIR};FADC_BIN_DIR=${CMAKE_BINARY_DIR}/bin")
endforeach()
# ONNX's backend node tests (tests/onnx/node-tests.bash): the interpreter
# leg everywhere, the compiled leg (an LLVM compile per test) under `slow`.
foreach(leg interp compiled)
  add_test(NAME onnx/node-tests-${leg} COMMAND bash ${CMAKE_SOURCE_DIR}/tests/onnx/node-tests.bash ${leg})
  set(labels golden)
  if(leg STREQUAL "compiled")
    set(labels "golden;slow")
  endif()
  set_tests_properties(onnx/node-tests-${leg} PROPERTIES LABELS "${labels}" SKIP_RETURN_CODE 77
    TIMEOUT 1500
    ENVIRONMENT "FADC=$<TARGET_FILE:fadc>;FADC_SOURCE_DIR=${CMAKE_SOURCE_DIR};FADC_BIN_DIR=${CMAKE_BINARY_DIR}/bin")
endforeach()
# NVRTC compiles the nine models' tasks (detr's and the conv nets' above all)
# for about ten minutes on the 2-core machine: a longer limit than the 600 s
# that tests/run-all.sh gives every other test.
set_tests_properties(gpu/cuda-zoo.sh PROPERTIES TIMEOUT 2400)

# GPU programs (tests/gpu/): on the runtime alone, never LLVM, so that they
# run on GPU machines, which have no LLVM (docs/CUDA.md says how); the
# tests/gpu/*.sh scripts compile artifacts here and run them, exiting 77
# where there is no CUDA device.
add_executable(gpu_check ${CMAKE_SOURCE_DIR}/tests/gpu/gpu_check.c)
target_link_libraries(gpu_check PRIVATE fadc_runtime m)
# mma_err (tests/gpu/mma_err.c): a strict f32 GEMM's error against float64 on a GPU.
add_executable(mma_err ${CMAKE_SOURCE_DIR}/tests/gpu/mma_err.c)
target_link_libraries(mma_err PRIVATE fadc_runtime m)
# shard_check: a batched task whole on one GPU and as K shards
# (runtime/shard.h), compared and timed (tests/gpu/cuda-shards.sh).
add_executable(shard_check ${CMAKE_SOURCE_DIR}/tests/gpu/shard_check.c)
target_include_directories(shard_check PRIVATE ${CMAKE_SOURCE_DIR}/runtime)
target_link_libraries(shard_check PRIVATE fadc_runtime m ${CMAKE_DL_LIBS})

# two_ctx: two ordinary CUDA contexts driven from one thread, interleaved
# (tests/gpu/two-contexts.sh).
add_executable(two_ctx ${CMAKE_SOURCE_DIR}/tests/gpu/two_ctx.c)
target_link_libraries(two_ctx PRIVATE fadc_runtime m)

# The CUDA-graph suite (tests/gpu/cudagraph/): seeds/001's programs and the
# graph-tree tests; the script compiles the .ir programs here (NVRTC) and
# runs the driver, which exits 77 without a CUDA device.
add_executable(cudagraph_check ${CMAKE_SOURCE_DIR}/tests/gpu/cudagraph/cudagraph_check.c)
target_link_libraries(cudagraph_check PRIVATE fadc_runtime m)
add_test(NAME gpu/cudagraph COMMAND bash ${CMAKE_SOURCE_DIR}/tests/gpu/cudagraph/cudagraph.sh)
set_tests_properties(gpu/cudagraph PROPERTIES LABELS "golden;cuda" SKIP_RETURN_CODE 77
  ENVIRONMENT "FADC=$<TARGET_FILE:fadc>;FADC_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache;FADC_SOURCE_DIR=${CMAKE_SOURCE_DIR};FADC_BIN_DIR=${CMAKE_BINARY_DIR}/bin")

if(FADC_FUZZ)
  add_executable(fuzz_parse ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_parse.c)
  target_compile_options(fuzz_parse PRIVATE -fsanitize=fuzzer)
  target_link_options(fuzz_parse PRIVATE -fsanitize=fuzzer)
  target_link_libraries(fuzz_parse PRIVATE fadc_frontend fadc_ir)
  # Every input the fuzzer ever crashed on is kept in tests/fuzz/regress and
  # replayed here (libFuzzer runs the given files once each).
  add_test(NAME fuzz/regress COMMAND fuzz_parse -runs=0 ${CMAKE_SOURCE_DIR}/tests/fuzz/regress
                                              ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus)
  set_tests_properties(fuzz/regress PROPERTIES LABELS fuzz)
  # The file readers' harnesses: .npy and .safetensors (runtime/tensorio.c),
  # the bench YAML (bench/config.c), the artifact descriptor
  # (runtime/artifact.c), the ONNX frontend (frontend/onnx*.c).  Each has a seed corpus, tests/fuzz/corpus-SHORT,
  # and keeps the inputs it ever crashed on in tests/fuzz/regress-SHORT
  # (made by the first one); fuzz/regress-SHORT replays both.
  # tests/run-all.sh gives each a share of the fuzzing minute.
  function(fadc_fuzz_harness name short)
    add_executable(${name} ${CMAKE_SOURCE_DIR}/tests/fuzz/${name}.c)
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    target_link_libraries(${name} PRIVATE ${ARGN})
    set(dirs ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus-${short})
    if(EXISTS ${CMAKE_SOURCE_DIR}/tests/fuzz/regress-${short})
      list(APPEND dirs ${CMAKE_SOURCE_DIR}/tests/fuzz/regress-${short})
    endif()
    add_test(NAME fuzz/regress-${short} COMMAND ${name} -runs=0 ${dirs})
    set_tests_properties(fuzz/regress-${short} PROPERTIES LABELS fuzz)
  endfunction()
  fadc_fuzz_harness(fuzz_npy npy fadc_runtime)
  fadc_fuzz_harness(fuzz_safetensors st fadc_runtime)
  fadc_fuzz_harness(fuzz_config yaml fadc_bench)
  fadc_fuzz_harness(fuzz_desc desc fadc_runtime)
  fadc_fuzz_harness(fuzz_onnx onnx fadc_onnx)
endif()
# test_ccache: the compile cache (codegen/ccache.c), no NVRTC needed.
target_link_libraries(test_ccache PRIVATE fadc_codegen)
target_include_directories(test_ccache PRIVATE ${CMAKE_SOURCE_DIR}/codegen)

# make install of this tree, used as a C user would: tests/install/install.sh
# (the example built with pkg-config and CMake against the install, its
# gradient norms against `fadc run`'s, the installed tools traced for paths
# into the trees, make uninstall).  Not in instrumented builds, which
# install nothing (CMakeLists.txt).
if(NOT FADC_SANITIZE AND NOT FADC_FUZZ)
  add_test(NAME install/install.sh
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/install/install.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
  set_tests_properties(install/install.sh PROPERTIES LABELS install)
endif()

# The Python package (python/fadc, docs/PYTHON.md): pytest (tests/python) on
# the build's libfadc.so and fadc, with Debian's python3, numpy and pytest
# (scripts/deps.sh installs them); the oracle is `fadc run`'s .npy files.
# In the sanitizer build libfadc.so is instrumented and python3 is not: the
# sanitizer runtime is preloaded (leak checks off: CPython keeps its own
# memory to the end).
find_program(FADC_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT FADC_PYTHON3)
  find_program(FADC_PYTHON3 python3)
endif()
set(py_env "FADC=$<TARGET_FILE:fadc>;FADC_LIB=$<TARGET_FILE:fadc_shared>;PYTHONPATH=${CMAKE_SOURCE_DIR}/python;PYTHONDONTWRITEBYTECODE=1;FADC_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")
if(FADC_SANITIZE)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libclang_rt.asan-x86_64.so
                  OUTPUT_VARIABLE py_asan OUTPUT_STRIP_TRAILING_WHITESPACE)
  list(APPEND py_env "LD_PRELOAD=${py_asan}" "ASAN_OPTIONS=detect_leaks=0")
endif()
add_test(NAME python COMMAND ${FADC_PYTHON3} -m pytest -q -p no:cacheprovider
                             ${CMAKE_SOURCE_DIR}/tests/python)
set_tests_properties(python PROPERTIES LABELS python ENVIRONMENT "${py_env}")
# test_runtime_cpu_levels forces each CPU level of a default artifact
# (FADC_CPU_LEVEL): x86-64-v3 above (with the errors, the descriptor and
# determinism), x86-64-v4 here, which skips (77) on a CPU without AVX-512.
add_test(NAME unit/test_runtime_cpu_levels_v4 COMMAND test_runtime_cpu_levels x86-64-v4)
set_tests_properties(unit/test_runtime_cpu_levels_v4 PROPERTIES LABELS unit SKIP_RETURN_CODE 77
                     ENVIRONMENT "FADC_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache;FADC_SOURCE_DIR=${CMAKE_SOURCE_DIR}")

# Data-parallel runs over several GPUs (runtime/multi.c): tests/gpu/multi.sh
# compiles a model here and runs multi_check (one GPU against a context
# over GPUs), exiting 77 without a device.
add_executable(multi_check ${CMAKE_SOURCE_DIR}/tests/gpu/multi_check.c)
target_link_libraries(multi_check PRIVATE fadc_runtime m)
# A stand-in for libnccl.so.2 that fails on demand (FAKE_NCCL=init|run|error):
# multi.sh points FADC_NCCL_LIB at it to check the deadline and the abort.
add_library(fake_nccl SHARED ${CMAKE_SOURCE_DIR}/tests/gpu/fake_nccl.c)
set_target_properties(fake_nccl PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
add_dependencies(multi_check fake_nccl)
target_compile_options(fake_nccl PRIVATE -Wno-missing-prototypes)
