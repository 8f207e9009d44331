# MOETRAIN_SANITIZE=address,undefined (tools/test.sh's sanitizer job): every C and C++ target,
# the library, the backend modules and the test executables, is compiled and linked with those
# sanitizers. -fno-sanitize-recover makes the first report fatal, so a test that triggers one
# fails instead of printing and passing; frame pointers and -g1 line tables keep the reports'
# stacks readable.
# CUDA sources are not instrumented (the job builds with MOETRAIN_WITH_CUDA=OFF: the SIMT
# harness runs the CUDA kernels as C++ instead, under the sanitizers).
if(MOETRAIN_SANITIZE)
  set(_san -fsanitize=${MOETRAIN_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer -g1)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_san}>")
  add_link_options(-fsanitize=${MOETRAIN_SANITIZE})
  # GCC's -Wmaybe-uninitialized reports false positives inside libstdc++ (std::regex,
  # std::function) once the sanitizers' instrumentation changes inlining; the normal build keeps
  # the warning, so nothing goes unchecked.
  add_compile_options("$<$<AND:$<COMPILE_LANGUAGE:C,CXX>,$<C_COMPILER_ID:GNU>>:-Wno-maybe-uninitialized>")
  message(STATUS "moetrain: sanitizers ${MOETRAIN_SANITIZE}")
endif()
