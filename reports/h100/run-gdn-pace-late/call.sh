# call 32 (ninth session): on an H200 call 30 (the pace gpu case, the whole ladder, the GDN run, the paced stamp probe);
# on an H100 only the GDN run (pace_late unmeasured anywhere) and the stamp probe's three shapes are already there.
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi32.txt 2>&1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (time timeout 90 /tmp/kb/bin/klab_gpu_tests -tc="pace=1|2*") > /tmp/r/gpu-pace.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-pace.log
  (time timeout 300 $K run q4-to-ceiling --timing stream --out /tmp/r/ladder) > /tmp/r/ladder.log 2>&1
  pack
  (time timeout 160 $K run gdn-step-fused gdn-stack --out /tmp/r/gdn) > /tmp/r/gdn.log 2>&1
  pack
  for sh in 6144x5120 5120x6144 17408x5120; do for p in "" --prepared; do timeout 40 $K probe-q4 --shape $sh --grid paced $p >> /tmp/r/probe-paced.jsonl 2>> /tmp/r/probe-paced.err; done; done
else
  (time timeout 160 $K run gdn-step-fused gdn-stack --out /tmp/r/gdn) > /tmp/r/gdn.log 2>&1
fi
pack
