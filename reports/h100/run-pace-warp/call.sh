# call 28 (written in the seventh session for the next one): the new rungs' gpu cases; on an H200 the whole ladder (88
# rungs: 84-87 never run there), the GDN run with the pace twins (fold_pace, pace_all) and q4-prep-split; on another card
# the same with a ladder slice. ~7 minutes on an H200.
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi28.txt 2>&1
(time timeout 60 /tmp/kb/bin/klab_gpu_tests -tc="pace=1|2*") > /tmp/r/gpu-pace.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-pace.log
(time timeout 120 /tmp/kb/bin/klab_gpu_tests -tc="every q4 kernel*") > /tmp/r/gpu-q4.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-q4.log
pack
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (time timeout 260 $K run q4-to-ceiling --timing stream --out /tmp/r/ladder) > /tmp/r/ladder.log 2>&1
else
  SLICE='*grid=fill,xprep=launch,load=bulk,pdl=on,rows=8|*grid=fill,xprep=*,load=bulk,pace=*|*grid=fill,xprep=warps,load=bulk,depth=2,pdl=on,rows=8|*grid=groups,xprep=launch,pdl=on,rows=8|*grid=groups,xprep=*,load=bulk,pdl=on,rows=8'
  (time timeout 100 $K run q4-to-ceiling --variants "$SLICE" --timing stream --out /tmp/r/pace-slice) > /tmp/r/pace-slice.log 2>&1
fi
pack
(time timeout 150 $K run gdn-step-fused gdn-stack --out /tmp/r/gdn) > /tmp/r/gdn.log 2>&1
pack
(time timeout 80 $K run q4-prep-split --timing stream --out /tmp/r/prep-split) > /tmp/r/prep-split.log 2>&1
pack
