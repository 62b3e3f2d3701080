# call 35 (ninth session): the pace gpu case (defer=4|8 new), gdn-stack-layers' gpu case and the GDN stacked case (rewritten); on an H200 the whole ladder
# (98 rungs), elsewhere a ladder slice (rungs 82, 85, 88-90, 92, 95, 96, the peers); gdn-stack-layers traced (each
# count's graph once more under CUPTI: its kernels' ends, so where a layer's ~33 us go); on an H200 the GDN run.
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi35.txt 2>&1
H200=0; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && H200=1
(time timeout 100 /tmp/kb/bin/klab_gpu_tests -tc="pace=1|2*,gdn-stack-layers*,GDN stacked input projections*") > /tmp/r/gpu.log 2>&1; echo "rc=$?" >> /tmp/r/gpu.log
pack
if [ $H200 = 1 ]; then
  (time timeout 240 $K run q4-to-ceiling --timing stream --out /tmp/r/ladder) > /tmp/r/ladder.log 2>&1
else
  SLICE='*grid=fill,xprep=launch,load=bulk,pace=1,pdl=on,rows=8|*grid=fill,xprep=warps,load=bulk,pace=1,*|*impl=cublas*'
  (time timeout 120 $K run q4-to-ceiling --timing stream --variants "$SLICE" --out /tmp/r/slice) > /tmp/r/slice.log 2>&1
fi
pack
(time timeout 120 $K run gdn-stack-layers --trace --out /tmp/r/layers) > /tmp/r/layers.log 2>&1
pack
if [ $H200 = 1 ]; then
  (time timeout 150 $K run gdn-step-fused gdn-stack --out /tmp/r/gdn) > /tmp/r/gdn.log 2>&1
  pack
fi
