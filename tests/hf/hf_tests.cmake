# Hugging Face interoperability tests (docs/INTEROP.md).
# - hf/hf_cli_tests.py (stdlib only): export / import refusals and CLI behaviour.
# - hf/hf_interop_tests.py (needs MOETRAIN_TEST_PYTHON with transformers over torch): logits,
#   greedy generation and bit-identical round trips against transformers, per family.
# moetrain_hf_logits gives the Python side moetrain's logits for a token sequence.
add_executable(moetrain_hf_logits ${CMAKE_CURRENT_LIST_DIR}/hf_logits.cpp)
target_link_libraries(moetrain_hf_logits PRIVATE moetrain)
moetrain_warnings(moetrain_hf_logits)

if(NOT TARGET moetrain_cli OR NOT Python3_FOUND)
  return()
endif()
function(moetrain_hf_register python script prefix)
  execute_process(COMMAND ${python} ${script} --list
                  OUTPUT_VARIABLE cases OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${script} --list failed (${rc})")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${script}
               ${CMAKE_CURRENT_LIST_DIR}/hf_testlib.py)
  foreach(t ${cases})
    add_test(NAME ${prefix}:${t}
             COMMAND ${python} ${script} --moetrain $<TARGET_FILE:moetrain_cli>
                     --logits $<TARGET_FILE:moetrain_hf_logits>
                     --work ${CMAKE_BINARY_DIR}/hf-work ${t})
    set_tests_properties(${prefix}:${t} PROPERTIES TIMEOUT 600)
  endforeach()
endfunction()
moetrain_hf_register(${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/hf/hf_cli_tests.py cli-hf)
if(MOETRAIN_TEST_PYTHON)
  moetrain_hf_register(${MOETRAIN_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/hf_interop_tests.py hf)
endif()
