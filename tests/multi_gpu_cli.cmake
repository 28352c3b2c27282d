# --devices, --shard and fa-bench merge end to end without a GPU: the worker processes are real
# (re-executions of fa-bench), their GPUs made up (--test-fake-devices: rows model_only, nothing
# launched); one worker dies on purpose (--test-fake-worker-fail). docs/multi-gpu.md.
#   cmake -DFA_BENCH=... -DOUT=... -P multi_gpu_cli.cmake
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
unset(ENV{SLURM_ARRAY_TASK_ID})
unset(ENV{JOB_COMPLETION_INDEX})

function(expect code regex)
  execute_process(COMMAND ${FA_BENCH} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc STREQUAL "${code}")
    message(FATAL_ERROR "fa-bench ${ARGN}: exit ${rc}, expected ${code}\n${out}\n${err}")
  endif()
  if(NOT "${out}${err}" MATCHES "${regex}")
    message(FATAL_ERROR "fa-bench ${ARGN}: output does not match '${regex}'\n${out}\n${err}")
  endif()
  message(STATUS "ok: exit ${rc}: fa-bench ${ARGN}")
endfunction()

set(SWEEP --N 1024,2048,4096 --d 64,128 --causal both --variants all)
# Two workers, one merged file; each GPU's line, the dealing, both workers finished.
expect(0 "gpu 0: fake GPU 0: 6 configuration.*gpu 1: fake GPU 1: 6 configuration.*gpu 1: finished"
       ${SWEEP} --devices all --test-fake-devices 2 --json ${OUT}/devices.json)
file(READ ${OUT}/devices.json doc)
string(JSON n LENGTH "${doc}" devices)
string(JSON g0 GET "${doc}" configs 0 gpu name)
string(JSON complete GET "${doc}" complete)
if(NOT n EQUAL 2 OR NOT g0 MATCHES "fake GPU" OR NOT complete STREQUAL "ON")
  message(FATAL_ERROR "--devices: merged file: devices ${n}, configs[0].gpu ${g0}, complete ${complete}")
endif()
# A listed subset; a device that is not there is bad input.
expect(0 "gpu 1: fake GPU 1: 12 configuration" ${SWEEP} --devices 1 --test-fake-devices 2
       --json ${OUT}/one.json)
expect(2 "^error: --devices: 2 is not a GPU here" ${SWEEP} --devices 0,2 --test-fake-devices 2)
# A worker that dies: its rows say so, the other's ran, exit 1 (a row errored), file complete.
expect(1 "gpu 1: finished after .*exited with code 86"
       ${SWEEP} --devices all --test-fake-devices 2 --test-fake-worker-fail 1 --json ${OUT}/fail.json)
file(READ ${OUT}/fail.json doc)
if(NOT doc MATCHES "the worker for GPU 1 \\(fake GPU 1, GPU-[0-9a-f-]+\\) exited with code 86")
  message(FATAL_ERROR "--test-fake-worker-fail: no row says the worker died")
endif()
if(NOT doc MATCHES "\"model_only\"")
  message(FATAL_ERROR "--test-fake-worker-fail: the other worker's rows are missing")
endif()

# Shards: the environment's variables, then merged: the unsharded file's configurations.
set(ENV{SLURM_ARRAY_TASK_ID} 1)
set(ENV{SLURM_ARRAY_TASK_COUNT} 2)
expect(0 "shard 1/2 \\(from SLURM_ARRAY_TASK_ID=1, SLURM_ARRAY_TASK_COUNT=2\\): 6 of 12"
       ${SWEEP} --model-only --json ${OUT}/s1.json)
unset(ENV{SLURM_ARRAY_TASK_ID})
unset(ENV{SLURM_ARRAY_TASK_COUNT})
expect(0 "shard 0/2: 6 of 12" ${SWEEP} --model-only --shard 0/2 --json ${OUT}/s0.json)
expect(0 "results: " ${SWEEP} --model-only --json ${OUT}/all.json)
expect(0 "merged 2 file\\(s\\): 12 configuration\\(s\\)" merge ${OUT}/s1.json ${OUT}/s0.json
       -o ${OUT}/merged.json)
file(READ ${OUT}/merged.json merged)
file(READ ${OUT}/all.json all)
string(JSON mc GET "${merged}" configs)
string(JSON ac GET "${all}" configs)
if(NOT mc STREQUAL ac)
  message(FATAL_ERROR "shards 0/2 and 1/2 merged differ from the unsharded run's configurations")
endif()
expect(0 "shard\\(s\\) 1 of 2 are not among the files" merge ${OUT}/s0.json -o ${OUT}/half.json)
# Refused: a shard twice, a different sweep's settings; bad input.
expect(3 "^error: merge: .*s0.json: row .* is also in .*s0.json.*nothing written"
       merge ${OUT}/s0.json ${OUT}/s0.json -o ${OUT}/dup.json)
if(EXISTS ${OUT}/dup.json)
  message(FATAL_ERROR "merge wrote a refused file")
endif()
expect(0 "results: " --N 8192 --model-only --warmup 3 --json ${OUT}/warm3.json)
expect(3 "settings.warmup is 3, but 10" merge ${OUT}/s0.json ${OUT}/warm3.json -o ${OUT}/x.json)
expect(2 "no output: -o OUT" merge ${OUT}/s0.json)
expect(2 "cannot open" merge ${OUT}/missing.json -o ${OUT}/x.json)
expect(2 "unknown flag --frobnicate" merge --frobnicate ${OUT}/s0.json -o ${OUT}/x.json)
expect(0 "usage: fa-bench merge" merge --help)
