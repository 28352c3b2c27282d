# fa-bench built without the cudnn-frontend headers (tests/CMakeLists.txt: fa-bench-no-cudnn):
# the build links, --list-variants says why the peer is missing, its rows (forward, stats on and
# off) say unsupported with the reason in the table and the result file, the other rows still
# plan, and the run exits 0.
#   cmake -DFA_BENCH=... -DOUT=... -P cudnn_missing.cmake
file(MAKE_DIRECTORY ${OUT})
set(reason "cuDNN peer not built: cudnn-frontend headers not found")

execute_process(COMMAND ${FA_BENCH} --list-variants RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT "${out}" MATCHES "${reason}.*run scripts/setup.sh")
  message(FATAL_ERROR "--list-variants: exit ${rc}, no '${reason}' in:\n${out}\n${err}")
endif()

file(REMOVE ${OUT}/r.json)
execute_process(COMMAND ${FA_BENCH} --N 256 --d 64 --variants fa2,cudnn --cudnn-stats both --model-only
                        --json ${OUT}/r.json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fa-bench --model-only: exit ${rc}\n${out}\n${err}")
endif()
file(READ ${OUT}/r.json json)
string(JSON nrows LENGTH "${json}" configs 0 results)
if(NOT nrows EQUAL 3)
  message(FATAL_ERROR "expected 3 rows (fa2, cudnn stats on and off), got ${nrows}\n${json}")
endif()
set(n_unsupported 0)
math(EXPR last "${nrows} - 1")
foreach(i RANGE ${last})
  string(JSON variant GET "${json}" configs 0 results ${i} variant)
  string(JSON status GET "${json}" configs 0 results ${i} status)
  string(JSON why GET "${json}" configs 0 results ${i} reason)
  if(variant STREQUAL "cudnn")
    if(NOT status STREQUAL "unsupported" OR NOT why MATCHES "^unsupported: ${reason}")
      message(FATAL_ERROR "cudnn row: status '${status}', reason '${why}'")
    endif()
    math(EXPR n_unsupported "${n_unsupported} + 1")
  elseif(NOT status STREQUAL "model_only")
    message(FATAL_ERROR "${variant} row: status '${status}' (expected model_only): '${why}'")
  endif()
endforeach()
if(NOT n_unsupported EQUAL 2)
  message(FATAL_ERROR "expected 2 unsupported cudnn rows, got ${n_unsupported}")
endif()
message(STATUS "ok: cudnn rows unsupported without cudnn-frontend; fa2 planned")
