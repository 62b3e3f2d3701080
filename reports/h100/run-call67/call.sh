# call 67 (fifteenth session): the gpu case "prepared x ..." after its fix (xprep=chunk's words from grid=groups; call 66
# found the test's error), ~1 minute on any card. Then on an H200 only: the ladder slice with rungs 85, 90, 97, 107-110
# (never on the H200: per-sm=2,stages=2 and defer=8,stages=4|3) and cuBLAS, q4-prep-split, the paced probe at the 17.7 MB
# shapes, gdn-stack (~6 minutes). On an H100 nothing more (its readings of these are in run-call56/58/64/66).
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi67.txt 2>&1
(time timeout 120 /tmp/kb/bin/klab_gpu_tests -tc='prepared x*') > /tmp/r/gpu-prepared.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-prepared.log
pack
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  SLICE='*xprep=warps,load=bulk,pace=1,pdl=on,rows=8|*pace=1,row-split=2,pdl=on,rows=8|*pace=1,defer=8,pdl=on,rows=4|*defer=8,stages=*|*per-sm=2,stages=2,pdl=on,rows=8|*impl=cublas*'
  (time timeout 120 $K run q4-to-ceiling --timing stream --variants "$SLICE" --out /tmp/r/slice) > /tmp/r/slice.log 2>&1
  pack
  (time timeout 90 $K run q4-prep-split --timing stream --out /tmp/r/prep-split) > /tmp/r/prep-split.log 2>&1
  for s in 6144x5120 5120x6144; do
    for p in "" --prepared; do (timeout 30 $K probe-q4 --shape $s --grid paced $p) >> /tmp/r/probe.log 2>&1; done
  done
  pack
  (time timeout 150 $K run gdn-stack --out /tmp/r/stack) > /tmp/r/stack.log 2>&1
fi
pack
tail -n 4 /tmp/r/*.log
