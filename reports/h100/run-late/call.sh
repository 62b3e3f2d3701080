# call 20: trigger=late against the depth rings (and 10, 11, 50), stream; the q4 model cases
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi20.txt 2>&1
(time timeout 200 $K run q4-to-ceiling --variants 'q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,pdl=on,rows=8|*grid=groups,xprep=launch,load=bulk,pdl=on,rows=8|*grid=fill,xprep=launch,load=bulk,pdl=on,rows=8|*load=bulk,depth=*' --timing stream --out /tmp/r/late) > /tmp/r/late.log 2>&1
pack
(time timeout 60 /tmp/kb/bin/klab_gpu_tests -tc='every q4 kernel*') > /tmp/r/gpu-late.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-late.log
pack
