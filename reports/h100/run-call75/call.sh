# call 75 (the chase, step 2): the q4 step replayed token by token (tests/gpu/test_gdn_replay.cpp). Rung 110
# (defer=8,stages=3) with 40 replays on 570244c's binary (the release after the loads' issue) and on ddd0294's (the
# release after their completion); then on ddd0294: every defer rung in the step 20 replays, the variant cases of the
# defer rungs (step and mat-vec) 5 replays, and a ladder slice of the defer=8 rungs.
mkdir -p /tmp/kb /tmp/kb0 /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb && tar xJf .carry/before.txz -C /tmp/kb0
T=/tmp/kb/bin/klab_gpu_tests
T0=/tmp/kb0/bin/klab_gpu_tests
K=/tmp/kb/bin/klab
CASE='the q4 step*'
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; for f in /tmp/r/*.log; do gzip -kf $f; done; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi75.txt 2>&1
(time KLAB_GPU_REPLAYS=40 KLAB_GPU_VARIANTS='*defer=8,stages=3,*' timeout 100 $T0 -tc="$CASE") > /tmp/r/before110.log 2>&1
(time KLAB_GPU_REPLAYS=40 KLAB_GPU_VARIANTS='*defer=8,stages=3,*' timeout 100 $T -tc="$CASE") > /tmp/r/after110.log 2>&1
pack
(time KLAB_GPU_REPLAYS=20 KLAB_GPU_VARIANTS='*defer=*' timeout 120 $T -tc="$CASE") > /tmp/r/after-defer.log 2>&1
pack
(time timeout 70 $K run q4-to-ceiling --timing stream --variants '*defer=8*|*xprep=warps,load=bulk,pace=1,pdl=on,rows=8' --out /tmp/r/slice) > /tmp/r/slice.log 2>&1
pack
(time KLAB_GPU_REPLAYS=5 KLAB_GPU_VARIANTS='gdn_step/tier=q4,proj=*defer=*|q4_gemv/*defer=*' timeout 120 $T -tc='every variant of an op with params*') > /tmp/r/after-variants.log 2>&1
pack
grep -h "test cases\|real\|elements differ\|^  [A-Za-z]* (after\|  out (after" /tmp/r/*.log | cut -c1-300 | head -60

# calls 77-80 (the same warm machine, right after; /tmp/kb and /tmp/kb0 as call 75 left them)
T=/tmp/kb/bin/klab_gpu_tests; T0=/tmp/kb0/bin/klab_gpu_tests
# 77: the token-by-token replay, 100 replays, twice on each binary
for i in 1 2; do
  KLAB_GPU_REPLAYS=100 KLAB_GPU_VARIANTS='*defer=8,stages=3,*' timeout 60 $T0 -tc='the q4 step*' > before110-$i.log 2>&1
  KLAB_GPU_REPLAYS=100 KLAB_GPU_VARIANTS='*defer=8,stages=3,*' timeout 60 $T -tc='the q4 step*' > after110-$i.log 2>&1
done
# 78, 79: the variant case (the one that showed the race in calls 70 and 74) with rung 110 as the step's projections
V='gdn_step/tier=q4,proj=*defer=8+stages=3+*'
KLAB_GPU_REPLAYS=30 KLAB_GPU_VARIANTS="$V" timeout 80 $T0 -tc='every variant of an op with params*' > before-var.log 2>&1
KLAB_GPU_REPLAYS=30 KLAB_GPU_VARIANTS="$V" timeout 80 $T -tc='every variant of an op with params*' > after-var.log 2>&1
KLAB_GPU_REPLAYS=200 KLAB_GPU_VARIANTS="$V" timeout 70 $T0 -tc='every variant of an op with params*' > before-var200.log 2>&1
KLAB_GPU_REPLAYS=200 KLAB_GPU_VARIANTS="$V" timeout 70 $T -tc='every variant of an op with params*' > after-var200.log 2>&1
# 80: after the fix, 400 replays of rung 110 in the step, and every defer rung in the step 100 replays
KLAB_GPU_REPLAYS=400 KLAB_GPU_VARIANTS="$V" timeout 60 $T -tc='every variant of an op with params*' > after-var400.log 2>&1
KLAB_GPU_REPLAYS=100 KLAB_GPU_VARIANTS='gdn_step/tier=q4,proj=*defer=*' timeout 50 $T -tc='every variant of an op with params*' > after-defer-var100.log 2>&1
