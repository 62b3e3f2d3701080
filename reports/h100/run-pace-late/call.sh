# call 30 (eighth session): the pace gpu case (rows=4 and pace=1-2 new), the whole ladder (95 rungs), then on an H200 the GDN run
# (pace_all, pace_late in the graph), elsewhere q4-prep-split; then the paced ring's stamp probe.
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi30.txt 2>&1
(time timeout 90 /tmp/kb/bin/klab_gpu_tests -tc="pace=1|2*") > /tmp/r/gpu-pace.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-pace.log
(time timeout 270 $K run q4-to-ceiling --timing stream --out /tmp/r/ladder) > /tmp/r/ladder.log 2>&1
pack
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (time timeout 160 $K run gdn-step-fused gdn-stack --out /tmp/r/gdn) > /tmp/r/gdn.log 2>&1
else
  (time timeout 80 $K run q4-prep-split --timing stream --out /tmp/r/prep-split) > /tmp/r/prep-split.log 2>&1
fi
pack
for sh in 6144x5120 5120x6144 17408x5120; do for p in "" --prepared; do timeout 40 $K probe-q4 --shape $sh --grid paced $p >> /tmp/r/probe-paced.jsonl 2>> /tmp/r/probe-paced.err; done; done
pack
