#!/usr/bin/env bash
# A short check of a build on a lent GPU machine: the gpu suite, the mat-vec races twice in stream
# mode (their input and output hashes must agree: determinism), klab_bench on two cases (verified
# before timed), and compute-sanitizer (memcheck over a quick run, racecheck over the q4 gpu tests).
#   scripts/h200_check.sh BIN OUT
set -uo pipefail
B="$1"; OUT="$2"
(time timeout 60 "$B/klab_gpu_tests") > "$OUT/gpu-tests.log" 2>&1; echo "gpu tests rc=$?" >> "$OUT/gpu-tests.log"
for i in 1 2; do
  (timeout 100 "$B/klab" run f32-gemv-vs-cublas q4-vs-peers --timing stream --reps 20 --out "$OUT/det$i") > "$OUT/det$i.log" 2>&1
  echo "det$i rc=$?" >> "$OUT/det$i.log"; rm -f "$OUT/det$i"/report*.csv
done
{
  timeout 60 "$B/klab_bench" '--benchmark_filter=(unroll=4|block-per-thread,dot=offset,rows=8)/17408x5120'; echo "bench rc=$?"
  S=/usr/local/cuda/bin/compute-sanitizer
  timeout 90 $S --tool memcheck --error-exitcode 9 "$B/klab" run f32-gemv-vs-cublas q4-to-ceiling --quick --reps 2 --warmup 0 \
    --timing launch --out /tmp/san | tail -5; echo "memcheck rc=${PIPESTATUS[0]}"
  timeout 90 $S --tool racecheck --error-exitcode 9 "$B/klab_gpu_tests" '--test-case=*q4*' | tail -5; echo "racecheck rc=${PIPESTATUS[0]}"
} > "$OUT/checks.log" 2>&1
tail -3 "$OUT/gpu-tests.log"; grep -E "rc=|^claims" "$OUT"/det*.log; grep -E "rc=|ERROR SUMMARY|max_rel|FAIL" "$OUT/checks.log" | head -20
