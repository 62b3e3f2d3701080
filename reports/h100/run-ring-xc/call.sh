mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi.txt 2>&1
(time timeout 150 /tmp/kb/bin/klab_gpu_tests '-tc=row-split*,prepared x*') > /tmp/r/gpu-tests.log 2>&1; echo "gpu tests rc=$?" >> /tmp/r/gpu-tests.log
pack
V='*grid=fill,xprep=launch,load=bulk,pdl=on,rows=8|*grid=fill,xprep=launch,xpf=l2,load=bulk,pdl=on,rows=8|*grid=fill,xprep=cluster*'
(time timeout 200 $K run q4-to-ceiling --variants "$V" --timing stream --trace --out /tmp/r/xc) > /tmp/r/xc.log 2>&1
pack
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (time timeout 120 $K run q4-prep-split --timing stream --trace --out /tmp/r/split) > /tmp/r/split.log 2>&1
  pack
  (time timeout 120 $K run gdn-recurrence --out /tmp/r/rec) > /tmp/r/rec.log 2>&1
  pack
fi
