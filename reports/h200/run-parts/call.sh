mkdir -p /tmp/kb /tmp/r && tar xzf .carry/bin.tgz -C /tmp/kb
K=/tmp/kb/bin/klab; P=q4_gemv/map=packed,dot=q8-dp4a,grid=groups
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi.txt 2>&1
(timeout 100 /tmp/kb/bin/klab_gpu_tests -tc='every q4 kernel*,prepared x*,every q4_gemv variant*') > /tmp/r/gpu-tests.log 2>&1; echo "gpu tests rc=$?" >> /tmp/r/gpu-tests.log
for n in 2 3; do for x in producer launch; do for s in 6144x5120 5120x6144 10240x5120 17408x5120; do
  timeout 30 $K ab $P,xprep=$x,pdl=on,rows=8 $P,xprep=$x,parts=$n,pdl=on,rows=8 --shape $s --timing stream --out /tmp/r/p$n-$x-$s > /tmp/r/p$n-$x-$s.log 2>&1
done; done; done
tar czf $OUT/r.tgz -C /tmp r
for x in producer launch; do
  timeout 30 $K ab $P,xprep=$x,pdl=on,rows=8 $P,xprep=$x,parts=2,pdl=on,rows=8 --shape 6144x5120 --timing stream --trace --out /tmp/r/trace-$x > /tmp/r/trace-$x.log 2>&1
done
find /tmp/r -name report.jsonl -exec gzip {} \;
tar czf $OUT/r.tgz -C /tmp r
