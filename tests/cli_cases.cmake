# fa-bench as a user runs it, on hostile input (issue 13): each case was a crash, a runaway or a
# silent wrong answer. Model-only (no GPU needed, none used when present).
#   cmake -DFA_BENCH=... -DDATA=tests/data -DOUT=... -P cli_cases.cmake
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
set(M --model-only --N 1024)

# expect(CODE REGEX args...): exit code and a regex over stdout + stderr; sets `out`, `err`.
function(expect code regex)
  execute_process(COMMAND ${FA_BENCH} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e TIMEOUT 60)
  if(NOT rc STREQUAL "${code}")
    message(FATAL_ERROR "fa-bench ${ARGN}: exit ${rc}, expected ${code}\n${o}\n${e}")
  endif()
  if(NOT "${o}${e}" MATCHES "${regex}")
    message(FATAL_ERROR "fa-bench ${ARGN}: output does not match '${regex}'\n${o}\n${e}")
  endif()
  if(NOT code STREQUAL "0")
    # Bad input and write failures: one line on stderr.
    string(REGEX MATCHALL "\n" lines "${e}")
    list(LENGTH lines n)
    if(NOT n EQUAL 1 OR NOT e MATCHES "^error: ")
      message(FATAL_ERROR "fa-bench ${ARGN}: expected one 'error: ' line on stderr, got:\n${e}")
    endif()
  endif()
  set(out "${o}" PARENT_SCOPE)
  set(err "${e}" PARENT_SCOPE)
  message(STATUS "ok: exit ${rc}: fa-bench ${ARGN}")
endfunction()

# Crashes and runaways.
expect(0 "fa1 .*unsupported" ${M} --d 256 --json ${OUT}/d256.json)  # was SIGFPE (exit 136)
expect(2 "--N/--kv-len/--batch/--heads: .*overflows 64-bit" --N 1024:4611686018427387904 --json ${OUT}/x.json)  # was 17 GB, 62 s

# Output paths are checked before anything runs.
file(WRITE ${OUT}/afile "x")
expect(2 "--json: .*: is a directory" ${M} --json ${OUT})
expect(2 "--csv: .*afile/x.csv: .*afile is not a directory" ${M} --json ${OUT}/never.json --csv ${OUT}/afile/x.csv)
expect(2 "--markdown: .* is also the --json file" ${M} --json ${OUT}/same.json --markdown ${OUT}/same.json)
foreach(f never.json same.json)
  if(EXISTS ${OUT}/${f})
    message(FATAL_ERROR "${f} was written although the run was refused")
  endif()
endforeach()

# Not regular files: written in place, once; links to regular files keep the link.
expect(0 "results: " ${M} --json ${OUT}/s.json --csv /dev/stdout)
string(REGEX MATCHALL "B,H,N,d,causal" headers "${out}")
list(LENGTH headers n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "--csv /dev/stdout: ${n} CSV headers on stdout, expected 1\n${out}")
endif()
file(WRITE ${OUT}/real.json "old")
file(CREATE_LINK real.json ${OUT}/link.json SYMBOLIC)
expect(0 "results: " ${M} --json ${OUT}/link.json)
file(READ ${OUT}/real.json real)
if(NOT IS_SYMLINK ${OUT}/link.json OR NOT real MATCHES "fa-bench/5")
  message(FATAL_ERROR "--json LINK: the link was replaced or its target not written")
endif()

# A full stdout is an error (exit 4), not a success.
execute_process(COMMAND ${FA_BENCH} ${M} --json ${OUT}/full.json OUTPUT_FILE /dev/full RESULT_VARIABLE rc ERROR_VARIABLE e)
if(NOT rc EQUAL 4 OR NOT e MATCHES "error: stdout: write failed: No space left on device")
  message(FATAL_ERROR "stdout on /dev/full: exit ${rc}, expected 4\n${e}")
endif()
message(STATUS "ok: exit 4: fa-bench ${M} >/dev/full")

# Values that were accepted and meant something else.
expect(2 "--block-q: 4294967360 is too large" ${M} --variants fa2 --block-q 4294967360)  # ran as 64
expect(2 "--min-time: inf" ${M} --min-time inf)
expect(2 "--repetitions: 0 \\(accepted: 1 or more\\)" ${M} --repetitions 0)
expect(2 "--benchmark_min_time=abc: Google Benchmark does not accept this value" ${M} --benchmark_min_time=abc)
expect(2 "--benchmark_no_such_flag=1: not a Google Benchmark flag" ${M} --benchmark_no_such_flag=1)
expect(0 "fa2" ${M} --variants all,fa2 --json ${OUT}/all-fa2.json)
expect(0 "results: " --model-only --N 1024,1024 --d 64,64 --json ${OUT}/dup.json)
file(READ ${OUT}/dup.json dup)
string(JSON n LENGTH "${dup}" configs)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "--N 1024,1024 --d 64,64: ${n} configurations, expected 1")
endif()

# What a newcomer reads.
expect(0 "Usage: fa-bench .*fa-bench gate --baseline" --help)
expect(0 "shared memory per SM M = 233472 B \\(no GPU: Hopper's, H100/H200" ${M} --json ${OUT}/m.json)
expect(0 "M = 100000 B \\(--model-smem-per-sm" ${M} --model-smem-per-sm 100000 --json ${OUT}/m2.json)

# The reader behind the gate refuses impossible values and duplicate configurations (exit 2).
file(READ ${DATA}/gate-h200-base.json base)
string(JSON cfg GET "${base}" configs 0)
string(JSON ncfg LENGTH "${base}" configs)
string(JSON dup_doc SET "${base}" configs ${ncfg} "${cfg}")
file(WRITE ${OUT}/gate-dup.json "${dup_doc}")
string(JSON neg_doc SET "${base}" configs 0 results 0 timing samples_ms 0 "-5.04")
file(WRITE ${OUT}/gate-negative.json "${neg_doc}")
string(JSON nsamples LENGTH "${base}" configs 0 results 0 timing samples_ms)
set(zero_doc "${base}")
math(EXPR last "${nsamples} - 1")
foreach(i RANGE ${last})
  string(JSON zero_doc SET "${zero_doc}" configs 0 results 0 timing samples_ms ${i} "0")
endforeach()
file(WRITE ${OUT}/gate-zero.json "${zero_doc}")
string(JSON neg_counter SET "${base}" configs 0 results 0 counters values dram__bytes_read.sum "-1")
file(WRITE ${OUT}/gate-neg-counter.json "${neg_counter}")
set(B gate --baseline ${DATA}/gate-h200-base.json)
expect(2 "gate-dup.json: configs\\[${ncfg}\\]: the same configuration as configs\\[0\\]" ${B} --current ${OUT}/gate-dup.json)
expect(2 "gate-negative.json: configs\\[0\\]\\.results\\[0\\]\\.timing\\.samples_ms\\[0\\]: impossible value -5\\.04"
       ${B} --current ${OUT}/gate-negative.json)
expect(2 "gate-zero.json: .*samples_ms\\[0\\]: impossible value 0" ${B} --current ${OUT}/gate-zero.json)
expect(2 "gate-neg-counter.json: .*counters\\.values\\.dram__bytes_read\\.sum: impossible value -1" ${B}
       --current ${OUT}/gate-neg-counter.json)
expect(0 "PASS" ${B} --current ${DATA}/gate-h200-base.json)  # the unchanged file still passes
