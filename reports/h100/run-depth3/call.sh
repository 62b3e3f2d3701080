# call 22 (warm H100): depth=3 beside 1, 2 and the ring, stream; q4-prep-split whole
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi22.txt 2>&1
(time timeout 150 $K run q4-to-ceiling --variants '*grid=fill,xprep=launch,load=bulk,pdl=on,rows=8|*grid=fill,xprep=launch,load=bulk,depth=*' --timing stream --out /tmp/r/depth3) > /tmp/r/depth3.log 2>&1
pack
(time timeout 200 $K run q4-prep-split --timing stream --out /tmp/r/split3) > /tmp/r/split3.log 2>&1
pack
(time timeout 60 /tmp/kb/bin/klab_gpu_tests -tc='every q4 kernel*,prepared x*') > /tmp/r/gpu-depth3.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-depth3.log
pack
