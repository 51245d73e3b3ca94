# SPDX-License-Identifier: BSD-3-Clause
# Writes the generated dat.conf (cmake -P, at build time): the entries of
# CANDIDATES that open and pass a loopback connection here, and a comment
# naming each one left out with the reason. datinfo --probe runs each
# candidate in a child process, so a provider that crashes (libfabric's
# sockets provider on a connection request) or hangs rules out its own
# entry and nothing else.
#   -DDATINFO=  -DCANDIDATES=  -DHEADER=  -DOUTPUT=  -DDEFAULT_IA=
#   [-DPROBE_TIMEOUT=seconds per entry, default 20]
cmake_minimum_required(VERSION 3.19) # string(JSON)
if(NOT PROBE_TIMEOUT)
  set(PROBE_TIMEOUT 20)
endif()

file(STRINGS "${CANDIDATES}" lines)
# Sanitizer builds: the probe asks whether a provider works, not whether our
# code is clean (the test suites do that), and a leak report at exit or a
# race report must not rule out an entry.
# Its own working directory: a crashing provider's fault handler leaves
# backtrace files (datinfo.*.btr) in the current one.
set(probe_cwd "${OUTPUT}.probe")
file(REMOVE_RECURSE "${probe_cwd}")
file(MAKE_DIRECTORY "${probe_cwd}")
execute_process(
  WORKING_DIRECTORY "${probe_cwd}"
  COMMAND ${CMAKE_COMMAND} -E env --unset=DAT_DBG_TYPE --unset=DAT_DBG_DEST --unset=DAT_DBG_PREFIX
          DAT_OVERRIDE=${CANDIDATES}
          ASAN_OPTIONS=detect_leaks=0:intercept_send=0
          TSAN_OPTIONS=report_bugs=0:intercept_send=0
          UBSAN_OPTIONS=halt_on_error=0
          ${DATINFO} --probe --json --timeout ${PROBE_TIMEOUT}
  OUTPUT_VARIABLE json
  ERROR_VARIABLE probe_log
  RESULT_VARIABLE rc)
file(REMOVE_RECURSE "${probe_cwd}")

set(kept "")
set(left_out "")
set(default_kept FALSE)
string(JSON count ERROR_VARIABLE json_error LENGTH "${json}" entries)
if(json_error)
  message(WARNING "dat.conf: datinfo --probe gave no report (${rc}): ${json_error}\n${probe_log}\n"
                  "Writing the default entry ${DEFAULT_IA} alone, untested.")
  set(count 0)
  foreach(line IN LISTS lines)
    if(line MATCHES "^${DEFAULT_IA} ")
      string(APPEND kept "${line}\n")
      set(default_kept TRUE)
    endif()
  endforeach()
endif()
if(count GREATER 0)
  math(EXPR last "${count} - 1")
  foreach(i RANGE ${last})
    string(JSON name GET "${json}" entries ${i} ia_name)
    string(JSON line_no GET "${json}" entries ${i} line)
    string(JSON status GET "${json}" entries ${i} status)
    string(JSON result ERROR_VARIABLE no_probe GET "${json}" entries ${i} probe result)
    math(EXPR index "${line_no} - 1")
    list(GET lines ${index} record)
    if(result STREQUAL "ok")
      string(APPEND kept "${record}\n")
    elseif(name STREQUAL DEFAULT_IA)
      # The documented default stays first even here, said loudly: a
      # machine without a loopback TCP connection at build time (a sandbox)
      # would otherwise build a registry with no default IA.
      message(WARNING "dat.conf: the default entry ${name} did not pass here: ${status}; kept")
      string(APPEND kept "# ${name} did not pass the loopback check when this file was generated\n"
                         "# (${status}); kept as the default entry.\n${record}\n")
    else()
      string(REPLACE "\n" " " status "${status}")
      string(APPEND left_out "#   ${name}: ${status}\n#     ${record}\n")
    endif()
    if(name STREQUAL DEFAULT_IA)
      set(default_kept TRUE)
    endif()
  endforeach()
endif()
if(NOT default_kept)
  message(FATAL_ERROR "dat.conf: no candidate entry named ${DEFAULT_IA} in ${CANDIDATES}")
endif()

file(READ "${HEADER}" text)
string(APPEND text "${kept}")
if(left_out)
  string(APPEND text "#\n# Left out: these candidates did not open or did not pass a loopback\n"
                     "# connection (datinfo --probe) when this file was generated:\n${left_out}")
endif()
file(WRITE "${OUTPUT}.tmp" "${text}")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
