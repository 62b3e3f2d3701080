mkdir -p /tmp/kb /tmp/r && tar xzf .carry/bin.tgz -C /tmp/kb
K=/tmp/kb/bin/klab; Q=q4_gemv/map=packed,dot=q8-dp4a
F=$Q,grid=fill,xprep=launch,xpf=l2,load=bulk; H=$Q,grid=half,xprep=launch,xpf=l2,load=bulk,per-sm=2
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi.txt 2>&1
for s in 17408x5120 10240x5120 6144x5120 5120x6144; do
  timeout 40 $K ab $F,pdl=on,rows=8 $F,row-split=2,pdl=on,rows=8 --shape $s --timing stream --out /tmp/r/f2-$s > /tmp/r/f2-$s.log 2>&1
  timeout 40 $K ab $F,pdl=on,rows=8 $F,row-split=4,pdl=on,rows=8 --shape $s --timing stream --out /tmp/r/f4-$s > /tmp/r/f4-$s.log 2>&1
  timeout 40 $K ab $H,pdl=on,rows=8 $H,row-split=2,pdl=on,rows=8 --shape $s --timing stream --out /tmp/r/h2-$s > /tmp/r/h2-$s.log 2>&1
done
tar czf $OUT/r.tgz -C /tmp r
for s in 17408x5120 6144x5120; do
  timeout 40 $K ab $F,pdl=on,rows=8 $F,row-split=4,pdl=on,rows=8 --shape $s --timing stream --hot --out /tmp/r/hot4-$s > /tmp/r/hot4-$s.log 2>&1
done
timeout 40 $K ab $F,pdl=on,rows=8 $F,row-split=2,pdl=on,rows=8 --shape 17408x5120 --timing stream --trace --out /tmp/r/trace2 > /tmp/r/trace2.log 2>&1
(timeout 150 /tmp/kb/bin/klab_gpu_tests -tc='every q4 kernel*,every q4_gemv variant*,row-split*') > /tmp/r/gpu-tests.log 2>&1; echo "gpu tests rc=$?" >> /tmp/r/gpu-tests.log
find /tmp/r -name report.jsonl -exec gzip {} \;
tar czf $OUT/r.tgz -C /tmp r
