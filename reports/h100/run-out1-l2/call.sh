# call 43 (tenth session): call 42 again after its fix (rest=l2's kernel opted into the ring's shared memory): the q4
# pace gpu case, the GDN run (pace_out1_l2), the layer sweep traced.
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi43.txt 2>&1
(time timeout 50 /tmp/kb/bin/klab_gpu_tests -tc="pace=1|2*") > /tmp/r/gpu.log 2>&1; echo "rc=$?" >> /tmp/r/gpu.log
pack
(time timeout 125 $K run gdn-step-fused gdn-stack --out /tmp/r/gdn) > /tmp/r/gdn.log 2>&1
pack
(time timeout 25 $K run gdn-stack-layers --trace --out /tmp/r/layers) > /tmp/r/layers.log 2>&1
pack
tail -n 4 /tmp/r/*.log
