#!/usr/bin/env bash
# Builds klab's fuzz targets (clang, libFuzzer + ASan + UBSan) and runs each over its committed
# corpus for a while: the CI smoke run (ctest's `fuzz` test, 20 s a target, 60 s in all). New inputs
# go to BUILD_DIR/work, never into fuzz/corpus. Fails on any crash, leak, sanitizer report, timeout or
# broken invariant; the input is saved under BUILD_DIR/artifacts and the log tail printed.
#   fuzz/smoke.sh [BUILD_DIR (build/fuzz)] [SECONDS_PER_TARGET (20)]
# Exit: 0 clean, 1 a finding or a failed build, 77 no clang++ with libFuzzer here (ctest: SKIPPED).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(mkdir -p "${1:-$ROOT/build/fuzz}" && cd "${1:-$ROOT/build/fuzz}" && pwd)
SECS=${2:-20}
TARGETS=(fuzz_safetensors fuzz_npy fuzz_cli)
declare -A MAX_LEN=([fuzz_safetensors]=4096 [fuzz_npy]=4096 [fuzz_cli]=512)

# clang and its libFuzzer runtime (Debian: clang, libclang-rt-14-dev), checked by linking a probe.
probe="$BUILD/probe"
if ! command -v clang++ >/dev/null ||
   ! printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' |
     clang++ -x c++ -fsanitize=fuzzer,address,undefined - -o "$probe" 2>"$probe.err"; then
  echo "fuzz smoke: SKIP: no clang++ with libFuzzer (scripts/setup installs clang and libclang-rt-dev)"
  cat "$probe.err" 2>/dev/null || true
  exit 77
fi

cmake -S "$ROOT/fuzz" -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$BUILD" -j 2

status=0
for t in "${TARGETS[@]}"; do
  rm -rf "$BUILD/work/$t"
  mkdir -p "$BUILD/work/$t" "$BUILD/artifacts"
  log="$BUILD/$t.log"
  if "$BUILD/$t" -max_total_time="$SECS" -max_len="${MAX_LEN[$t]}" -malloc_limit_mb=64 -timeout=10 \
       -dict="$ROOT/fuzz/dict/$t.dict" -print_final_stats=1 -artifact_prefix="$BUILD/artifacts/$t-" \
       "$BUILD/work/$t" "$ROOT/fuzz/corpus/$t" >"$log" 2>&1; then
    echo "fuzz smoke: $t: $(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$') executions in ${SECS} s, no finding"
  else
    status=1
    echo "fuzz smoke: $t: FAILED (log $log, input under $BUILD/artifacts):"
    tail -n 60 "$log"
  fi
done
exit $status
