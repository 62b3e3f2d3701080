# call 41 (tenth session, owed on the H200): the GDN run (pace_out1 and its twins against pace_all and the candidate); on
# an H200 the whole ladder (105 rungs: 84-104 never ran there); the layer sweep traced (the candidate, pace_all,
# pace_out1); last, the gpu cases the tenth session touched (pace, fold=ba-conv). ~9 minutes on an H200.
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi41.txt 2>&1
H200=0; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && H200=1
(time timeout 150 $K run gdn-step-fused gdn-stack --out /tmp/r/gdn) > /tmp/r/gdn.log 2>&1
pack
if [ $H200 = 1 ]; then
  (time timeout 250 $K run q4-to-ceiling --timing stream --out /tmp/r/ladder) > /tmp/r/ladder.log 2>&1
  pack
fi
(time timeout 60 $K run gdn-stack-layers --trace --out /tmp/r/layers) > /tmp/r/layers.log 2>&1
pack
(time timeout 80 /tmp/kb/bin/klab_gpu_tests -tc="pace=1|2*,GDN b|a in the conv_norm_bg launch*") > /tmp/r/gpu.log 2>&1; echo "rc=$?" >> /tmp/r/gpu.log
pack
tail -n 3 /tmp/r/*.log
