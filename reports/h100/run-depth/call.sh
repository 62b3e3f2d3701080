# call 16 (2026-12-05, fifth session): probe-hop everywhere; the H200-owed recurrence parts on an H200 only
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi.txt 2>&1
(time timeout 60 $K probe-hop) > /tmp/r/probe-hop.jsonl 2> /tmp/r/probe-hop.err; echo "rc=$?" >> /tmp/r/probe-hop.err
pack
(time timeout 60 /tmp/kb/bin/klab_gpu_tests -tc='probe-hop*,the measured ceiling*') > /tmp/r/gpu-hop.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-hop.log
pack
(time timeout 60 $K probe-hop --launches 512 --form none --form 8,2 --form 8,4) > /tmp/r/probe-hop-512.jsonl 2>> /tmp/r/probe-hop.err
pack
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (time timeout 120 $K run gdn-recurrence --out /tmp/r/rec) > /tmp/r/rec.log 2>&1
  pack
  for p in "--pdl ahead" "--pdl one-ahead" "--o direct"; do
    timeout 30 $K probe-rec --cols 32 --rows 16 $p >> /tmp/r/probe-rec.jsonl 2>> /tmp/r/probe-rec.err; echo "$p rc=$?" >> /tmp/r/probe-rec.err; done
  pack
fi
# call 17: the ring at depth=2|1 against rung 11 (ladder subset, stream), q4-prep-split whole, their gpu cases; probe-hop
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi17.txt 2>&1
(time timeout 150 $K run q4-to-ceiling --variants '*grid=fill,xprep=launch,load=bulk,pdl=on,rows=8|*grid=fill,xprep=launch,load=bulk,depth=*' --timing stream --out /tmp/r/depth) > /tmp/r/depth.log 2>&1
pack
(time timeout 200 $K run q4-prep-split --timing stream --out /tmp/r/split) > /tmp/r/split.log 2>&1
pack
(time timeout 120 /tmp/kb/bin/klab_gpu_tests -tc='every q4 kernel*,prepared x*,probe-hop*') > /tmp/r/gpu-depth.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-depth.log
pack
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (time timeout 60 $K probe-hop) > /tmp/r/probe-hop-h200.jsonl 2> /tmp/r/probe-hop-h200.err
  pack
fi
# call 18 (the same warm H100): q4-to-ceiling --variants <the best small-shape rungs, 11, 32, 69, 70> --timing stream --out /tmp/r/best
