# Compile one source against our public headers and make sure no dat2 header
# from another tree (e.g. Debian's /usr/include/dat2, which libdapl-dev
# installs and which the compiler would silently fall back to for a header we
# do not have) took part.
#
#   cmake -DCOMPILER=<cc> "-DFLAGS=<space separated flags>" -DINCLUDE_DIR=<dir>
#         -DSOURCE=<file> -DOBJECT=<file> [-DNAME=<test name>] [-DSUBDIR=dat]
#         -P check_header_compile.cmake

foreach(_v COMPILER INCLUDE_DIR SOURCE OBJECT)
  if(NOT DEFINED ${_v} OR "${${_v}}" STREQUAL "")
    message(FATAL_ERROR "${NAME}: ${_v} not set")
  endif()
endforeach()
if(NOT NAME)
  set(NAME "header compile")
endif()
if(NOT SUBDIR)
  set(SUBDIR dat2)
endif()
if(NOT EXISTS "${INCLUDE_DIR}/${SUBDIR}")
  message(FATAL_ERROR "${NAME}: FAILED: ${INCLUDE_DIR}/${SUBDIR} does not exist")
endif()

separate_arguments(_flags UNIX_COMMAND "${FLAGS}")
execute_process(
  COMMAND "${COMPILER}" ${_flags} -H -I "${INCLUDE_DIR}" -c "${SOURCE}" -o "${OBJECT}"
  RESULT_VARIABLE _rc
  OUTPUT_VARIABLE _out
  ERROR_VARIABLE _err)

# "-H" lists every included file on stderr as "<dots> <path>".
get_filename_component(_ours "${INCLUDE_DIR}/${SUBDIR}" REALPATH)
string(REGEX MATCHALL "(^|\n)\\.+ [^\n]*" _included "${_err}")
set(_foreign "")
foreach(_line IN LISTS _included)
  string(REGEX REPLACE "^\n?\\.+ " "" _path "${_line}")
  if(_path MATCHES "(^|/)${SUBDIR}/[^/]+$")
    get_filename_component(_real "${_path}" REALPATH)
    string(FIND "${_real}" "${_ours}/" _pos)
    if(NOT _pos EQUAL 0)
      list(APPEND _foreign "${_path}")
    endif()
  endif()
endforeach()

string(REGEX REPLACE "(^|\n)\\.+ [^\n]*" "" _diag "${_err}")
string(REGEX REPLACE "Multiple include guards may be useful for:\n(/[^\n]*\n?)*" "" _diag "${_diag}")
string(STRIP "${_diag}" _diag)

# message(NOTICE) prints the compiler's diagnostics verbatim (FATAL_ERROR
# would re-wrap them).
if(_foreign)
  list(REMOVE_DUPLICATES _foreign)
  string(REPLACE ";" "\n  " _foreign "${_foreign}")
  message(NOTICE "${_diag}")
  message(NOTICE "${NAME}: ${SUBDIR} headers from outside ${_ours} were used:\n  ${_foreign}")
  message(FATAL_ERROR "${NAME}: FAILED (foreign ${SUBDIR} headers)")
endif()
if(NOT _rc EQUAL 0)
  message(NOTICE "${_diag}")
  message(NOTICE "${NAME}: command: ${COMPILER} ${FLAGS} -I ${INCLUDE_DIR} -c ${SOURCE}")
  message(FATAL_ERROR "${NAME}: FAILED (does not compile)")
endif()
message(STATUS "${NAME}: OK (${COMPILER} ${FLAGS} -I ${INCLUDE_DIR})")
