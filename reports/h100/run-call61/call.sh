# call 61 (thirteenth session): grid=own (rungs 111-114) and the GDN twins own_out4, own_out8: the gpu case first (never
# launched); if it passed, a ladder slice beside rungs 85, 90, 97, 109 and cuBLAS, then the GDN run; on an H200 also call
# 57's owed readings (q4-prep-split, the paced probe, rungs 107-110).
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi61.txt 2>&1
(time timeout 120 /tmp/kb/bin/klab_gpu_tests -tc="grid=own*") > /tmp/r/gpu.log 2>&1; ok=$?; echo "rc=$ok" >> /tmp/r/gpu.log
pack
[ $ok = 0 ] || exit 0
SLICE='*xprep=warps,load=bulk,pace=1,pdl=on,rows=8|*pace=1,row-split=2,pdl=on,rows=8|*pace=1,defer=8,pdl=on,rows=4|*defer=8,stages=4*|*grid=own*|*impl=cublas*'
H200=0; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && H200=1
[ $H200 = 1 ] && SLICE="$SLICE|*per-sm=2,stages=2*|*defer=8,stages=3*"
(time timeout 110 $K run q4-to-ceiling --timing stream --variants "$SLICE" --out /tmp/r/slice) > /tmp/r/slice.log 2>&1
pack
(time timeout 220 $K run gdn-step-fused gdn-stack --out /tmp/r/gdn) > /tmp/r/gdn.log 2>&1
pack
if [ $H200 = 1 ]; then
  (time timeout 90 $K run q4-prep-split --timing stream --out /tmp/r/prep-split) > /tmp/r/prep-split.log 2>&1
  for s in 6144x5120 5120x6144; do
    for p in "" --prepared; do (timeout 30 $K probe-q4 --shape $s --grid paced $p) >> /tmp/r/probe.log 2>&1; done
  done
  pack
fi
tail -n 3 /tmp/r/*.log
