# call 25 (the sixth session's plan, written without a device): the stamp probe and the new ring rungs on any card; on
# an H200 the whole ladder and the GDN run it owes
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi25.txt 2>&1
# pace=1|2 first and alone: a new protocol (full and empty mbarriers); if it hangs, nothing below races it
(time timeout 60 /tmp/kb/bin/klab_gpu_tests -tc="pace=1|2*") > /tmp/r/gpu-pace.log 2>&1; PACE=$?; echo "rc=$PACE" >> /tmp/r/gpu-pace.log
(time timeout 90 /tmp/kb/bin/klab_gpu_tests -tc="the stamp probe*") > /tmp/r/gpu-stamp.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-stamp.log
(time timeout 120 /tmp/kb/bin/klab_gpu_tests -tc="every q4 kernel*") > /tmp/r/gpu-q4.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-q4.log
pack
for shape in 6144x5120 5120x6144 10240x5120 17408x5120; do
  for p in "" "--prepared"; do
    for g in "--depth 0" "--depth 2" "--depth 3" "--grid groups"; do
      timeout 30 $K probe-q4 --shape $shape $g $p >> /tmp/r/probe-q4.jsonl 2>> /tmp/r/probe-q4.err; echo "$shape $g $p rc=$?" >> /tmp/r/probe-q4.err
    done
  done
done
python3 scripts/probe_table.py /tmp/r/probe-q4.jsonl --out /tmp/r/probe-q4.md 2>> /tmp/r/probe-q4.err
pack
SLICE='*grid=fill,xprep=launch,load=bulk,pdl=on,rows=8|*grid=fill,xprep=*,load=bulk,depth=2,pdl=on,rows=8|*grid=fill,xprep=*,load=bulk,depth=3,pdl=on,rows=8|*grid=groups,xprep=launch,xpf=l2,pdl=on,rows=8|*grid=groups,xprep=warp*,pdl=on,rows=8|*grid=fill,xprep=launch,load=bulk,depth=*,row-split=2,pdl=on,rows=8'
[ "$PACE" = 0 ] && SLICE="$SLICE|*grid=fill,xprep=launch,load=bulk,pace=*"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  if [ "$PACE" = 0 ]; then
    (time timeout 240 $K run q4-to-ceiling --timing stream --out /tmp/r/ladder) > /tmp/r/ladder.log 2>&1
  else
    (time timeout 120 $K run q4-to-ceiling --variants "$SLICE" --timing stream --out /tmp/r/warp-rings) > /tmp/r/warp-rings.log 2>&1
  fi
  pack
  (time timeout 240 $K run gdn-step-fused gdn-stack --out /tmp/r/gdn) > /tmp/r/gdn.log 2>&1
  pack
else
  (time timeout 120 $K run q4-to-ceiling --variants "$SLICE" --timing stream --out /tmp/r/warp-rings) > /tmp/r/warp-rings.log 2>&1
  pack
fi
