# fa-bench gate as CI runs it: exit codes on the derived H200 fixtures, the error line naming the
# file and the problem, and the Markdown / JUnit / export files written (JUnit parsed by Python's
# XML parser when Python is there).
#   cmake -DFA_BENCH=... -DDATA=tests/data -DOUT=... [-DPYTHON=...] -P gate_cli.cmake
file(MAKE_DIRECTORY ${OUT})

function(expect code regex)
  execute_process(COMMAND ${FA_BENCH} gate ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc STREQUAL "${code}")
    message(FATAL_ERROR "fa-bench gate ${ARGN}: exit ${rc}, expected ${code}\n${out}\n${err}")
  endif()
  if(NOT "${out}${err}" MATCHES "${regex}")
    message(FATAL_ERROR "fa-bench gate ${ARGN}: output does not match '${regex}'\n${out}\n${err}")
  endif()
  message(STATUS "ok: exit ${rc}: gate ${ARGN}")
endfunction()

set(B --baseline ${DATA}/gate-h200-base.json)
expect(0 "PASS \\(exit 0\\)" ${B} --current ${DATA}/gate-h200-base.json)
expect(2 "the baseline has no counters.*--time-only" --baseline ${DATA}/gate-h200-other-run.json --current ${DATA}/gate-h200-base.json)
expect(0 "PASS \\(exit 0\\)" --baseline ${DATA}/gate-h200-other-run.json --current ${DATA}/gate-h200-base.json --time-only)
expect(1 "fa2 +2\\.1304 +2\\.3434 +\\+10\\.0% slower.*REGRESSION" ${B} --current ${DATA}/gate-time-fa2-x1.10.json
       --markdown ${OUT}/gate.md --junit ${OUT}/gate.xml --github-benchmark ${OUT}/gab.json --bmf ${OUT}/bmf.json)
expect(0 "PASS" ${B} --current ${DATA}/gate-time-jitter3.json)
expect(0 "PASS" ${B} --current ${DATA}/gate-time-all-x1.02.json)
expect(1 "dram_bytes: .*\\+5\\.00%" ${B} --current ${DATA}/gate-dram-fa2-x1.05.json)
expect(0 "improved" ${B} --current ${DATA}/gate-improved-fa2.json)
expect(0 "PASS \\(exit 0\\)" ${B} --current ${DATA}/gate-time-jitter20.json --strict)
expect(2 "missing from the current run" ${B} --current ${DATA}/gate-missing-row.json)
expect(0 "allow-missing" ${B} --current ${DATA}/gate-missing-row.json --allow-missing)
expect(2 "different GPU models" ${B} --current ${DATA}/gate-foreign-gpu.json)
expect(1 "failed verification" ${B} --current ${DATA}/gate-failed-variant.json)
expect(2 "no measurements" ${B} --current ${DATA}/gate-no-gpu.json)
expect(2 "gate-truncated.json: not valid JSON" ${B} --current ${DATA}/gate-truncated.json)
expect(2 "gate-schema-unknown.json: schema: unknown version" --baseline ${DATA}/gate-schema-unknown.json
       --current ${DATA}/gate-h200-base.json)
expect(2 "no-such-file.json: cannot open" ${B} --current ${DATA}/no-such-file.json)
expect(2 "--time-tolerance: 'abc' is not a number" ${B} --current ${DATA}/gate-h200-base.json --time-tolerance abc)
expect(0 "PASS" ${B} --current ${DATA}/gate-time-fa2-x1.10.json --time-tolerance 12%)
expect(0 "l2_bytes 5\\.0%" ${B} --current ${DATA}/gate-h200-fa2-rerun.json --allow-missing)
expect(1 "l2_bytes: .*\\+2\\.2[0-9]%, tolerance 2\\.0%" ${B} --current ${DATA}/gate-h200-fa2-rerun.json --allow-missing
       --counter-tolerance 2%)
expect(0 "PASS" ${B} --current ${DATA}/gate-dram-fa2-x1.05.json --counter-tolerance dram_bytes=6%)
expect(2 "unknown counter 'foo'" ${B} --current ${DATA}/gate-h200-base.json --counter-tolerance foo=1%)
# --gate-energy on files without energy: the rows cannot be compared (exit 2), or warn.
expect(2 "energy per launch not measured in the baseline" ${B} --current ${DATA}/gate-h200-base.json --gate-energy)
expect(0 "cannot compare it \\(--allow-missing\\).*PASS \\(exit 0\\)" ${B} --current ${DATA}/gate-h200-base.json --gate-energy --allow-missing)
expect(2 "--energy-tolerance: only with --gate-energy" ${B} --current ${DATA}/gate-h200-base.json --energy-tolerance 4%)
expect(2 "--energy-tolerance: 'x'" ${B} --current ${DATA}/gate-h200-base.json --gate-energy --energy-tolerance x)
expect(0 "baseline written" --current ${DATA}/gate-h200-base.json --update-baseline ${OUT}/new-baseline.json)
expect(0 "PASS" --baseline ${OUT}/new-baseline.json --current ${DATA}/gate-h200-base.json)
expect(2 "not written as a baseline" --current ${DATA}/gate-failed-variant.json --update-baseline ${OUT}/bad.json)

# Issue 12: the regressions the old default passed fail (exit 1); the real same-build pair passes.
set(H --baseline ${DATA}/gate-same-build-a-h200.json)
expect(0 "PASS \\(exit 0\\)" ${H} --current ${DATA}/gate-same-build-b-h200.json)
expect(1 "fa2 .*slower.*REGRESSION" ${H} --current ${DATA}/gate-fa2-slowed-build-h200.json)
expect(1 "fa2 .*\\+29\\.[0-9]% slower.*REGRESSION" ${B} --current ${DATA}/gate-time-fa2-x1.30-jitter6.json)
expect(1 "cycles \\+3\\.4%.*SM clock differs" ${B} --current ${DATA}/gate-time-fa2-x1.10-clock-6.json)
expect(1 "fa2 .*\\+15\\.0% slower.*REGRESSION" ${B} --current ${DATA}/gate-time-fa2-x1.15-3old.json)
expect(1 "fa1 .*\\+50\\.0% slower.*REGRESSION.*n = 14 / 9" ${B} --current ${DATA}/gate-time-fa1-x1.50-9samples.json)
expect(2 "4 timing samples in the current run.*--repetitions" ${B} --current ${DATA}/gate-time-fa2-4samples.json)
expect(1 "dram_bytes: .*\\+50\\.00%" ${B} --current ${DATA}/gate-counters-fa2-x1.50.json)
expect(2 "the baseline has no counters" --baseline ${DATA}/gate-no-counters.json --current ${DATA}/gate-counters-fa2-x1.50.json)
expect(0 "--time-only: bytes and FLOPs are not gated" --baseline ${DATA}/gate-no-counters.json --current ${DATA}/gate-counters-fa2-x1.50.json --time-only)
expect(2 "no counters.*--time-only" ${B} --current ${DATA}/gate-no-counters.json)
expect(2 "not written as a baseline: it has no counters" --current ${DATA}/gate-no-counters.json --update-baseline ${OUT}/counterless.json)
expect(0 "baseline written" --current ${DATA}/gate-no-counters.json --update-baseline ${OUT}/counterless.json --time-only)
expect(2 "appears twice|duplicate row" ${B} --current ${DATA}/gate-duplicate-row.json)
expect(2 "samples_ms\\[5\\]: impossible value -" ${B} --current ${DATA}/gate-negative-sample.json)
# Peers are sentinels: cudnn 20% slower is an environment change, a failure only with --gate-peers.
expect(0 "env change.*PASS \\(exit 0\\)" ${H} --current ${DATA}/gate-peer-cudnn-x1.20.json)
expect(1 "cudnn \\(peer\\).*REGRESSION" ${H} --current ${DATA}/gate-peer-cudnn-x1.20.json --gate-peers)
# Calibration: learned from the two same-build runs, stored in the baseline, used by the gate.
expect(0 "calibration from 2 runs.*baseline written" --calibrate ${DATA}/gate-same-build-a-h200.json
       ${DATA}/gate-same-build-b-h200.json --update-baseline ${OUT}/calibrated.json)
expect(0 "calibrated.*PASS \\(exit 0\\)" --baseline ${OUT}/calibrated.json --current ${DATA}/gate-same-build-b-h200.json)
expect(1 "tolerance 2\\.0% calibrated.*FAIL \\(exit 1\\)" --baseline ${OUT}/calibrated.json --current ${DATA}/gate-fa2-slowed-build-h200.json)
expect(2 "revision .* differs" --calibrate ${DATA}/gate-same-build-a-h200.json
       ${DATA}/gate-fa2-slowed-build-h200.json --update-baseline ${OUT}/bad-calibration.json)
expect(2 "--update-baseline FILE is required" --calibrate ${DATA}/gate-same-build-a-h200.json
       ${DATA}/gate-same-build-b-h200.json)
expect(2 "--calibrate" --calibrate ${DATA}/gate-same-build-a-h200.json --update-baseline ${OUT}/one.json)
if(PYTHON)  # the Python reader (reports/schema.py) reads a calibrated baseline
  execute_process(COMMAND ${PYTHON} -c "import sys; sys.path.insert(0, sys.argv[1]); from reports.schema import load_results; d = load_results(sys.argv[2]); assert d['gate_calibration']['schema'] == 'fa-bench-gate-calibration/2'"
                  ${DATA}/../.. ${OUT}/calibrated.json RESULT_VARIABLE rc OUTPUT_VARIABLE pout ERROR_VARIABLE perr)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "reports/schema.py does not read the calibrated baseline:\n${pout}${perr}")
  endif()
endif()

foreach(f gate.md gate.xml gab.json bmf.json)
  if(NOT EXISTS ${OUT}/${f})
    message(FATAL_ERROR "${OUT}/${f} was not written")
  endif()
endforeach()
if(PYTHON)
  execute_process(COMMAND ${PYTHON} -c "
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suite = root.find('testsuite')
assert suite.get('failures') == '2', suite.attrib
assert len(suite.findall('testcase')) == 8
assert len(suite.findall('testcase/failure')) == 2
gab = json.load(open(sys.argv[2]))
assert all({'name', 'unit', 'value'} <= set(e) for e in gab), gab[:2]
bmf = json.load(open(sys.argv[3]))
assert all('value' in m for b in bmf.values() for m in b.values())
md = open(sys.argv[4]).read()
rows = [l for l in md.splitlines() if l.startswith('|')]
assert len(rows) == 10 and len({l.count('|') for l in rows}) == 1, rows
" ${OUT}/gate.xml ${OUT}/gab.json ${OUT}/bmf.json ${OUT}/gate.md RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the gate's JUnit / JSON / Markdown output did not parse")
  endif()
endif()
