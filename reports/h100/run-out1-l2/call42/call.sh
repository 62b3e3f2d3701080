# call 42 (tenth session): the q4 pace gpu case (rung 102, rest=l2, new); the GDN run (pace_out1_l2 new); the
# layer sweep traced; a ladder slice (rung 85 and the per-sm=1 rungs).
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi42.txt 2>&1
(time timeout 60 /tmp/kb/bin/klab_gpu_tests -tc="pace=1|2*") > /tmp/r/gpu.log 2>&1; echo "rc=$?" >> /tmp/r/gpu.log
pack
(time timeout 150 $K run gdn-step-fused gdn-stack --out /tmp/r/gdn) > /tmp/r/gdn.log 2>&1
pack
(time timeout 40 $K run gdn-stack-layers --trace --out /tmp/r/layers) > /tmp/r/layers.log 2>&1
pack
SLICE='*xprep=warps,load=bulk,pace=1,pdl=on,rows=8|*xprep=warps,load=bulk,pace=1,per-sm=1,pdl=on,rows=8|*rest=l2*'
(time timeout 60 $K run q4-to-ceiling --timing stream --variants "$SLICE" --out /tmp/r/slice) > /tmp/r/slice.log 2>&1
pack
tail -n 4 /tmp/r/*.log
