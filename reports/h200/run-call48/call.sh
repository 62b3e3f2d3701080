# call 48 (eleventh session, owed on the H200): first the gpu cases the session touched (pace, with per-sm=3's rungs 105
# and 106, never launched on a GPU; fold=ba-conv; the span), so that a launch they refuse cannot stop the ladder; then the
# GDN run (pace_out1 and the span twins); the whole ladder on an H200 (107 rungs), a per-sm=3 slice on an H100, both only
# if the gpu cases passed; the layer sweep traced. ~9 minutes on an H200.
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi48.txt 2>&1
H200=0; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && H200=1
(time timeout 90 /tmp/kb/bin/klab_gpu_tests -tc="pace=1|2*,GDN b|a in the conv_norm_bg launch*,GDN span*") > /tmp/r/gpu.log 2>&1; ok=$?; echo "rc=$ok" >> /tmp/r/gpu.log
pack
(time timeout 160 $K run gdn-step-fused gdn-stack --out /tmp/r/gdn) > /tmp/r/gdn.log 2>&1
pack
if [ $ok = 0 ] && [ $H200 = 1 ]; then
  (time timeout 270 $K run q4-to-ceiling --timing stream --out /tmp/r/ladder) > /tmp/r/ladder.log 2>&1
elif [ $ok = 0 ]; then  # an H100 again: per-sm=3 (rungs 105, 106) beside their twins
  SLICE='*xprep=warps,load=bulk,pace=1,pdl=on,rows=8|*xprep=warps,load=bulk,pace=1,defer=4,pdl=on,rows=4|*per-sm=3*|*impl=cublas*'
  (time timeout 120 $K run q4-to-ceiling --timing stream --variants "$SLICE" --out /tmp/r/slice) > /tmp/r/slice.log 2>&1
fi
pack
(time timeout 60 $K run gdn-stack-layers --trace --out /tmp/r/layers) > /tmp/r/layers.log 2>&1
pack
tail -n 3 /tmp/r/*.log
