mkdir -p /tmp/kb /tmp/r && tar xzf .carry/bin.tgz -C /tmp/kb
K=/tmp/kb/bin/klab; P=q4_gemv/map=packed,dot=q8-dp4a,grid=groups
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi.txt 2>&1
for x in producer launch; do for s in 6144x5120 5120x6144 10240x5120 17408x5120; do
  timeout 30 $K ab $P,xprep=$x,pdl=on,rows=8 $P,xprep=$x,regs=48,pdl=on,rows=8 --shape $s --timing stream --out /tmp/r/$x-$s > /tmp/r/$x-$s.log 2>&1
done; done
for x in producer launch; do
  timeout 30 $K ab $P,xprep=$x,pdl=on,rows=8 $P,xprep=$x,regs=48,pdl=on,rows=8 --shape 6144x5120 --timing stream --trace --out /tmp/r/trace-$x > /tmp/r/trace-$x.log 2>&1
  timeout 30 $K ab $P,xprep=$x,pdl=on,rows=8 $P,xprep=$x,regs=48,pdl=on,rows=8 --shape 6144x5120 --timing stream --hot --out /tmp/r/hot-$x > /tmp/r/hot-$x.log 2>&1
done
tar czf $OUT/r.tgz -C /tmp r
(time timeout 240 /tmp/kb/bin/klab_gpu_tests) > /tmp/r/gpu-tests.log 2>&1; echo "gpu tests rc=$?" >> /tmp/r/gpu-tests.log
find /tmp/r -name report.jsonl -exec gzip {} \;
tar czf $OUT/r.tgz -C /tmp r
