# call 23: on an H200 everything owed (call19's list); on an H100 the xprep=block depth rungs beside their twins
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi23.txt 2>&1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash .carry/call19.sh
  (time timeout 120 $K run q4-to-ceiling --variants '*grid=fill,xprep=launch,load=bulk,pdl=on,rows=8|*grid=fill,xprep=*,load=bulk,depth=*' --timing stream --out /tmp/r/blockdepth) > /tmp/r/blockdepth.log 2>&1
  pack
else
  (time timeout 120 $K run q4-to-ceiling --variants '*grid=fill,xprep=launch,load=bulk,pdl=on,rows=8|*grid=fill,xprep=*,load=bulk,depth=1,*|*grid=fill,xprep=*,load=bulk,depth=2,*|q4_gemv/map=packed,dot=q8-dp4a,grid=groups,xprep=launch,load=bulk,pdl=on,rows=8' --timing stream --out /tmp/r/blockdepth) > /tmp/r/blockdepth.log 2>&1
  pack
  (time timeout 60 /tmp/kb/bin/klab_gpu_tests -tc='every q4 kernel*,row-split=2|4*') > /tmp/r/gpu-blockdepth.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-blockdepth.log
  pack
fi
