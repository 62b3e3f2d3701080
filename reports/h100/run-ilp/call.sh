# call 29 (eighth session): ilp=2|3's gpu case; on an H200 the whole ladder (90 rungs) and the GDN run; on another card
# a ladder slice (the pace rungs, the ring, rung 10, rung 50, depth=2 with xprep=warps); then the GDN run (pace_ilp).
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi29.txt 2>&1
(time timeout 90 /tmp/kb/bin/klab_gpu_tests -tc="pace=1|2*") > /tmp/r/gpu-pace.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-pace.log
pack
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (time timeout 270 $K run q4-to-ceiling --timing stream --out /tmp/r/ladder) > /tmp/r/ladder.log 2>&1
else
  SLICE='*grid=fill,xprep=launch,load=bulk,pdl=on,rows=8|*grid=fill,xprep=*,load=bulk,pace=*|*grid=fill,xprep=warps,load=bulk,depth=2,pdl=on,rows=8|*grid=groups,xprep=launch,pdl=on,rows=8|*grid=groups,xprep=launch,load=bulk,pdl=on,rows=8'
  (time timeout 100 $K run q4-to-ceiling --variants "$SLICE" --timing stream --out /tmp/r/ilp-slice) > /tmp/r/ilp-slice.log 2>&1
fi
pack
(time timeout 160 $K run gdn-step-fused gdn-stack --out /tmp/r/gdn) > /tmp/r/gdn.log 2>&1
pack
