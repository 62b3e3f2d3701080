# call 68 (fifteenth session): where grid=split-k's calls go. The gpu stamp case (its three new split-k kernels held to
# rungs 115, 116, 119's bits) and probe-q4 --grid split-k|split-k1|split-k-last against --grid paced (rung 85) at the four
# seed shapes, with x quantised in the launch and on prepared x, and probe-cluster again (now with the blocks each form
# holds at once) (~1.5 minutes). On an H200 also call 67's owed readings.
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi68.txt 2>&1
(time timeout 120 /tmp/kb/bin/klab_gpu_tests -tc='the stamp probe*,probe-cluster*') > /tmp/r/gpu-stamp.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-stamp.log
(timeout 60 $K probe-cluster) > /tmp/r/probe-cluster.jsonl 2> /tmp/r/probe-cluster.log
for s in 6144x5120 5120x6144 10240x5120 17408x5120; do
  for g in paced split-k split-k1 split-k-last; do
    for p in "" --prepared; do (timeout 30 $K probe-q4 --shape $s --grid $g $p) >> /tmp/r/probe-q4.jsonl 2>> /tmp/r/probe-q4.log; done
  done
done
pack
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  SLICE='*xprep=warps,load=bulk,pace=1,pdl=on,rows=8|*pace=1,row-split=2,pdl=on,rows=8|*pace=1,defer=8,pdl=on,rows=4|*defer=8,stages=*|*per-sm=2,stages=2,pdl=on,rows=8|*impl=cublas*'
  (time timeout 120 $K run q4-to-ceiling --timing stream --variants "$SLICE" --out /tmp/r/slice) > /tmp/r/slice.log 2>&1
  pack
  (time timeout 90 $K run q4-prep-split --timing stream --out /tmp/r/prep-split) > /tmp/r/prep-split.log 2>&1
  pack
  (time timeout 150 $K run gdn-stack --out /tmp/r/stack) > /tmp/r/stack.log 2>&1
fi
pack
tail -n 4 /tmp/r/*.log; wc -l /tmp/r/probe-q4.jsonl
