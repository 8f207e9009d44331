# IO tests outside doctest (include()d from tests/CMakeLists.txt after moetrain_tests exists):
# the independent stdlib-only Python reader tests/safetensors_reader.py checks checkpoints
# written by our C++ code. The fixture test runs one doctest case of moetrain_tests with
# MOETRAIN_IO_FIXTURE_DIR set, so the checkpoints land where the Python test reads them.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND AND TARGET moetrain_tests)
  set(MOETRAIN_IO_FIXTURE_DIR ${CMAKE_CURRENT_BINARY_DIR}/io-python-fixture)
  # Start empty, so that a stale fixture can never stand in for one that was not written.
  add_test(NAME io:clean_python_reader_fixture
           COMMAND ${CMAKE_COMMAND} -E rm -rf ${MOETRAIN_IO_FIXTURE_DIR})
  set_tests_properties(io:clean_python_reader_fixture PROPERTIES
    FIXTURES_SETUP moetrain_io_python_fixture)
  add_test(NAME io:write_python_reader_fixture
           COMMAND moetrain_tests "--test-case=checkpoint: fixture for the independent python reader")
  set_tests_properties(io:write_python_reader_fixture PROPERTIES
    ENVIRONMENT "MOETRAIN_IO_FIXTURE_DIR=${MOETRAIN_IO_FIXTURE_DIR}"
    FIXTURES_SETUP moetrain_io_python_fixture DEPENDS io:clean_python_reader_fixture TIMEOUT 300)
  add_test(NAME io:python_safetensors_reader
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/safetensors_reader.py
                   ${MOETRAIN_IO_FIXTURE_DIR})
  set_tests_properties(io:python_safetensors_reader PROPERTIES
    FIXTURES_REQUIRED moetrain_io_python_fixture TIMEOUT 120)
endif()
