# MOETRAIN_SANITIZE=address,undefined (tools/test.sh's sanitizer job): every C and C++ target,
# the library, the backend modules and the test executables, is compiled and linked with those
# sanitizers. -fno-sanitize-recover makes the first report fatal, so a test that triggers one
# fails instead of printing and passing; frame pointers and -g1 line tables keep the reports'
# stacks readable.
# CUDA sources are not instrumented (the job builds with MOETRAIN_WITH_CUDA=OFF: the SIMT
# harness runs the CUDA kernels as C++ instead, under the sanitizers).
# Optimization: -O1 (it comes after the build type's -O3, so it wins) everywhere except the code
# whose speed decides the tests' run time, which stays at -O3 (moetrain_sanitize_fast_sources:
# the cpu backend's kernels, and the SIMT harness, where the CUDA kernels run as C++ and which
# takes nine tenths of the sanitizer tests' time). Measured on the 2-core AVX2 AMD EPYC of
# 2026-11-28: GCC 12 with ASan + UBSan compiles models/io/checkpoint_integrity.cpp in 73 s at
# -O3 and 40 s at -O1, a doctest source in 22 s and 12 s; the sanitizer build was the CI stage
# that a change to a widely included header made run past CI's limit. ASan's documentation asks
# for -O1 or more; higher levels find no more (they can only optimise accesses away).
if(MOETRAIN_SANITIZE)
  set(_san -fsanitize=${MOETRAIN_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer -g1)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_san};-O1>")
  add_link_options(-fsanitize=${MOETRAIN_SANITIZE})
  # GCC's -Wmaybe-uninitialized reports false positives inside libstdc++ (std::regex,
  # std::function) once the sanitizers' instrumentation changes inlining; the normal build keeps
  # the warning, so nothing goes unchecked.
  add_compile_options("$<$<AND:$<COMPILE_LANGUAGE:C,CXX>,$<C_COMPILER_ID:GNU>>:-Wno-maybe-uninitialized>")
  message(STATUS "moetrain: sanitizers ${MOETRAIN_SANITIZE}")
endif()

# The sources named stay at -O3 under the sanitizers (see above); without them, nothing changes.
function(moetrain_sanitize_fast_sources)
  if(MOETRAIN_SANITIZE)
    set_property(SOURCE ${ARGN} APPEND PROPERTY COMPILE_OPTIONS -O3)
  endif()
endfunction()
