# call 27 (seventh session): pace's gpu case (now with pace=1,xprep=block|warps), the whole ladder (rungs 84, 85 new; a
# second run of pace=1 on this card), the GDN run with the pace=1 twins, q4-prep-split (pace=1's main kernel alone),
# (the stamp probe left out: the budget). On a card other than an H200: the ladder is a slice.
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi27.txt 2>&1
(time timeout 60 /tmp/kb/bin/klab_gpu_tests -tc="pace=1|2*") > /tmp/r/gpu-pace.log 2>&1; PACE=$?; echo "rc=$PACE" >> /tmp/r/gpu-pace.log
pack
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (time timeout 250 $K run q4-to-ceiling --timing stream --out /tmp/r/ladder) > /tmp/r/ladder.log 2>&1
else
  SLICE='*grid=fill,xprep=launch,load=bulk,pdl=on,rows=8|*grid=fill,xprep=*,load=bulk,pace=*|*grid=fill,xprep=warps,load=bulk,depth=2,pdl=on,rows=8|*grid=groups,xprep=launch,pdl=on,rows=8'
  (time timeout 150 $K run q4-to-ceiling --variants "$SLICE" --timing stream --out /tmp/r/pace-slice) > /tmp/r/pace-slice.log 2>&1
fi
pack
(time timeout 130 $K run gdn-step-fused gdn-stack --out /tmp/r/gdn) > /tmp/r/gdn.log 2>&1
pack
(time timeout 60 $K run q4-prep-split --timing stream --out /tmp/r/prep-split) > /tmp/r/prep-split.log 2>&1
pack
pack
