# call 56 (twelfth session): rungs 107, 108 (per-sm=2,stages=2 on rungs 85 and 90) and the GDN twin pace_split_x2 (the
# candidate with out_proj on rung 108): the gpu pace case (their bits, never launched) and the candidate's case first;
# then, if they passed, the GDN run (gdn-step-fused, gdn-stack) and a ladder slice beside their twins; on an H200 also
# issue 13's reading at the 17.7 MB shapes (call 54's).
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi56.txt 2>&1
(time timeout 100 /tmp/kb/bin/klab_gpu_tests -tc="pace=1|2*,GDN step candidate*") > /tmp/r/gpu.log 2>&1; ok=$?; echo "rc=$ok" >> /tmp/r/gpu.log
pack
[ $ok = 0 ] || exit 0
(time timeout 200 $K run gdn-step-fused gdn-stack --out /tmp/r/gdn) > /tmp/r/gdn.log 2>&1
pack
SLICE='*xprep=warps,load=bulk,pace=1,pdl=on,rows=8|*pace=1,row-split=2,pdl=on,rows=8|*pace=1,row-split=2,per-sm=1,pdl=on,rows=8|*per-sm=2,stages=2*|*impl=cublas*'
(time timeout 100 $K run q4-to-ceiling --timing stream --variants "$SLICE" --out /tmp/r/slice) > /tmp/r/slice.log 2>&1
pack
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (time timeout 90 $K run q4-prep-split --timing stream --out /tmp/r/prep-split) > /tmp/r/prep-split.log 2>&1
  for s in 6144x5120 5120x6144; do
    for p in "" --prepared; do (timeout 30 $K probe-q4 --shape $s --grid paced $p) >> /tmp/r/probe.log 2>&1; done
  done
  pack
fi
tail -n 3 /tmp/r/*.log
