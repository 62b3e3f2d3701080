# call 74. On an H200: a ladder slice (rungs 85, 90, 97, 107-110, 115-122, cuBLAS: the H200 has raced none since 106),
# the stamp probe at the 17.7 MB shapes, q4-prep-split, gdn-stack, then the chase's first step. On an H100 the chase of
# call 70's replay difference: 1. the step with each defer rung as its projections, 10 replays each; 2. every q4
# projection of the step, 2 replays each; 3. compute-sanitizer racecheck on the q4 defer=8 kernels alone.
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
T=/tmp/kb/bin/klab_gpu_tests
export KLAB_CLI=$K
CASE='every variant of an op with params*'
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; for f in /tmp/r/*.log; do gzip -kf $f; done; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi74.txt 2>&1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  SLICE='*xprep=warps,load=bulk,pace=1,pdl=on,rows=8|*pace=1,row-split=2,pdl=on,rows=8|*pace=1,defer=8,pdl=on,rows=4|*defer=8,stages=*|*per-sm=2,stages=2,pdl=on,rows=8|*grid=split-k*|*impl=cublas*'
  (time timeout 170 $K run q4-to-ceiling --timing stream --variants "$SLICE" --out /tmp/r/slice) > /tmp/r/slice.log 2>&1
  pack
  for s in 6144x5120 5120x6144; do
    for g in paced split-k split-k1 split-k4; do (timeout 30 $K probe-q4 --shape $s --grid $g) >> /tmp/r/probe-q4.jsonl 2>> /tmp/r/probe-q4.log; done
  done
  (time timeout 90 $K run q4-prep-split --timing stream --out /tmp/r/prep-split) > /tmp/r/prep-split.log 2>&1
  pack
  (time timeout 150 $K run gdn-stack --out /tmp/r/stack) > /tmp/r/stack.log 2>&1
  pack
  (time KLAB_GPU_REPLAYS=10 KLAB_GPU_VARIANTS='gdn_step/tier=q4,proj=*defer=*' timeout 100 $T -tc="$CASE") > /tmp/r/defer.log 2>&1
else
  (time KLAB_GPU_REPLAYS=10 KLAB_GPU_VARIANTS='gdn_step/tier=q4,proj=*defer=*' timeout 120 $T -tc="$CASE") > /tmp/r/defer.log 2>&1
  (time KLAB_GPU_REPLAYS=2 KLAB_GPU_VARIANTS='gdn_step/tier=q4,*' timeout 120 $T -tc="$CASE") > /tmp/r/all.log 2>&1
  (time KLAB_GPU_VARIANTS='q4_gemv/*defer=8*' timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --print-limit 20 $T -tc='every mat-vec variant*') > /tmp/r/racecheck.log 2>&1
fi
pack
grep -h "test cases\|ERROR SUMMARY\|RACECHECK SUMMARY\|real\|differ on replay" /tmp/r/*.log | head -40
