# call 58 (twelfth session): rungs 109, 110 (rung 97 at stages=4|3): the gpu pace case (their bits, never launched), then a
# ladder slice at the four shapes beside rungs 85, 97, 107 and the cuBLAS peers; on an H200 also call 57's reading
# (q4-prep-split, probe-q4) and gdn-stack.
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi58.txt 2>&1
(time timeout 100 /tmp/kb/bin/klab_gpu_tests -tc="pace=1|2*") > /tmp/r/gpu.log 2>&1; ok=$?; echo "rc=$ok" >> /tmp/r/gpu.log
pack
[ $ok = 0 ] || exit 0
SLICE='*xprep=warps,load=bulk,pace=1,pdl=on,rows=8|*pace=1,defer=8,*rows=4|*pace=1,per-sm=2,stages=2*|*impl=cublas*'
(time timeout 80 $K run q4-to-ceiling --timing stream --variants "$SLICE" --out /tmp/r/slice) > /tmp/r/slice.log 2>&1
pack
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (time timeout 80 $K run q4-prep-split --timing stream --out /tmp/r/prep-split) > /tmp/r/prep-split.log 2>&1
  for s in 6144x5120 5120x6144; do
    for p in "" --prepared; do (timeout 20 $K probe-q4 --shape $s --grid paced $p) >> /tmp/r/probe.log 2>&1; done
  done
  pack
  (time timeout 110 $K run gdn-stack --out /tmp/r/stack) > /tmp/r/stack.log 2>&1
  pack
fi
tail -n 3 /tmp/r/*.log
