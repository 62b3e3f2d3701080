# call 46 (eleventh session): the span's gpu case first (a hang would show here, 120 s at most); then, if it passed,
# the GDN run (pace_span2, pace_span3 against pace_out1) and the layer sweep traced (q4-fast-pace-span2 in it).
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi46.txt 2>&1
(time timeout 120 /tmp/kb/bin/klab_gpu_tests -tc="GDN span*") > /tmp/r/gpu.log 2>&1; rc=$?; echo "rc=$rc" >> /tmp/r/gpu.log
pack
if [ $rc = 0 ]; then
  (time timeout 170 $K run gdn-step-fused gdn-stack --out /tmp/r/gdn) > /tmp/r/gdn.log 2>&1
  pack
  (time timeout 60 $K run gdn-stack-layers --trace --out /tmp/r/layers) > /tmp/r/layers.log 2>&1
  pack
fi
tail -n 30 /tmp/r/gpu.log; grep -h "span" /tmp/r/gdn.log | grep "held\|per token" | cut -c1-300; tail -n 3 /tmp/r/*.log
