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
set(logits ARGS --logits $<TARGET_FILE:moetrain_hf_logits>)
moetrain_add_cli_script(cli-hf ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/hf_cli_tests.py
                        ${logits})
if(MOETRAIN_TEST_PYTHON)
  moetrain_add_cli_script(hf ${MOETRAIN_TEST_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/hf_interop_tests.py
                          ${logits})
endif()
