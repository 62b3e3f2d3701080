mkdir -p /tmp/kb /tmp/r && tar xzf .carry/bin.tgz -C /tmp/kb
K=/tmp/kb/bin/klab
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi.txt 2>&1
(time timeout 150 /tmp/kb/bin/klab_gpu_tests '-tc=GDN the conv history as a ring*,tail=split*,the measured ceiling*') > /tmp/r/gpu-tests.log 2>&1; echo "gpu tests rc=$?" >> /tmp/r/gpu-tests.log
pack
F=q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=launch,xpf=l2,load=bulk
(time timeout 60 $K ab $F,pdl=on,rows=8 $F,tail=split,pdl=on,rows=8 --set m=16896,17408 --set k=5120 --timing stream --reps 30 --out /tmp/r/tail) > /tmp/r/tail.log 2>&1
(time timeout 40 $K ab $F,pdl=on,rows=8 $F,tail=split,pdl=on,rows=8 --shape 5120x6144 --timing stream --reps 30 --out /tmp/r/tail6144) > /tmp/r/tail6144.log 2>&1
(time timeout 40 $K ab $F,row-split=2,pdl=on,rows=8 $F,tail=split,row-split=2,pdl=on,rows=8 --shape 17408x5120 --timing stream --reps 30 --out /tmp/r/tailsplit) > /tmp/r/tailsplit.log 2>&1
pack
for s in 17408x5120 16896x5120 10240x5120 6144x5120 5120x6144; do
  timeout 30 $K probe-ring --shape $s >> /tmp/r/probe.jsonl 2>> /tmp/r/probe.err; echo "$s rc=$?" >> /tmp/r/probe.err; done
pack
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (time timeout 120 $K run gdn-step-fused gdn-stack --out /tmp/r/gdn) > /tmp/r/gdn.log 2>&1
  pack
fi
