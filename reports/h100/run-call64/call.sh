# call 64: grid=split-k's first run (its gpu case, then a ladder slice beside rungs 85, 90, 97, 107-110 and cuBLAS, then
# gdn-stack with the twin kc_out); on an H200 also call 63's owed readings (q4-prep-split, the paced probe at 17.7 MB).
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi64.txt 2>&1
(time timeout 150 /tmp/kb/bin/klab_gpu_tests -tc='grid=split-k*') > /tmp/r/gpu-splitk.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-splitk.log
pack
if grep -q 'Status: SUCCESS' /tmp/r/gpu-splitk.log; then
  SLICE='*xprep=warps,load=bulk,pace=1,pdl=on,rows=8|*pace=1,row-split=2,pdl=on,rows=8|*pace=1,defer=8,*rows=4|*per-sm=2,stages=2*|*grid=split-k*|*impl=cublas*'
  (time timeout 150 $K run q4-to-ceiling --timing stream --variants "$SLICE" --out /tmp/r/slice) > /tmp/r/slice.log 2>&1
  pack
fi
(time timeout 170 $K run gdn-stack --out /tmp/r/stack) > /tmp/r/stack.log 2>&1
pack
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (time timeout 90 $K run q4-prep-split --timing stream --out /tmp/r/prep-split) > /tmp/r/prep-split.log 2>&1
  for s in 6144x5120 5120x6144; do
    for p in "" --prepared; do (timeout 30 $K probe-q4 --shape $s --grid paced $p) >> /tmp/r/probe.log 2>&1; done
  done
  pack
fi
tail -n 3 /tmp/r/*.log
