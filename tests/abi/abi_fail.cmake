# Used as a test command when a prerequisite of the ABI tests is missing at
# configure time: the test must fail with a reason, never be skipped.
#   cmake -DREASON=<text> -P abi_fail.cmake
message(FATAL_ERROR "FAILED: ${REASON}")
