# call 70 (owed since the fifteenth session). On an H200: a ladder slice (rungs 85, 90, 97, 107-110, 115-122, cuBLAS: the
# H200 has raced none since 106), q4-prep-split, the stamp probe (paced, split-k, split-k1, split-k4) at the 17.7 MB shapes,
# gdn-stack (~7 minutes). On an H100: the whole gpu suite on these binaries (~5.5 minutes; rungs 121, 122 and the stamped
# split-k kernels are new since call 66's).
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi70.txt 2>&1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  SLICE='*xprep=warps,load=bulk,pace=1,pdl=on,rows=8|*pace=1,row-split=2,pdl=on,rows=8|*pace=1,defer=8,pdl=on,rows=4|*defer=8,stages=*|*per-sm=2,stages=2,pdl=on,rows=8|*grid=split-k*|*impl=cublas*'
  (time timeout 180 $K run q4-to-ceiling --timing stream --variants "$SLICE" --out /tmp/r/slice) > /tmp/r/slice.log 2>&1
  pack
  for s in 6144x5120 5120x6144; do
    for g in paced split-k split-k1 split-k4; do (timeout 30 $K probe-q4 --shape $s --grid $g) >> /tmp/r/probe-q4.jsonl 2>> /tmp/r/probe-q4.log; done
  done
  (time timeout 90 $K run q4-prep-split --timing stream --out /tmp/r/prep-split) > /tmp/r/prep-split.log 2>&1
  pack
  (time timeout 150 $K run gdn-stack --out /tmp/r/stack) > /tmp/r/stack.log 2>&1
else
  (time timeout 360 /tmp/kb/bin/klab_gpu_tests) > /tmp/r/gpu.log 2>&1; echo "rc=$?" >> /tmp/r/gpu.log
fi
pack
tail -n 4 /tmp/r/*.log
