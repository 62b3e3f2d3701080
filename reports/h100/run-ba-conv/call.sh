# call 37 (tenth session): the fold=ba-conv gpu case; gdn-stack-layers traced (q4-fast, q4-fast-pace, q4-fast-pace-ba-conv);
# the GDN run (every twin: pace_defer and pace_ba_conv new); on an H200 the whole ladder last (98 rungs).
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi37.txt 2>&1
H200=0; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && H200=1
(time timeout 120 /tmp/kb/bin/klab_gpu_tests -tc="GDN b|a in the conv_norm_bg launch*") > /tmp/r/gpu.log 2>&1; echo "rc=$?" >> /tmp/r/gpu.log
pack
(time timeout 120 $K run gdn-stack-layers --trace --out /tmp/r/layers) > /tmp/r/layers.log 2>&1
pack
(time timeout 200 $K run gdn-step-fused gdn-stack --out /tmp/r/gdn) > /tmp/r/gdn.log 2>&1
pack
if [ $H200 = 1 ]; then
  (time timeout 240 $K run q4-to-ceiling --timing stream --out /tmp/r/ladder) > /tmp/r/ladder.log 2>&1
  pack
fi
tail -n 3 /tmp/r/*.log
