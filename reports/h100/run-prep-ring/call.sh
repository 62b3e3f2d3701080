mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi.txt 2>&1
(time timeout 120 /tmp/kb/bin/klab_gpu_tests '-tc=prepared x*,gdn_recurrence stage=smem*') > /tmp/r/gpu-tests.log 2>&1; echo "gpu tests rc=$?" >> /tmp/r/gpu-tests.log
pack
(time timeout 150 $K run q4-prep-split --timing stream --trace --out /tmp/r/split) > /tmp/r/split.log 2>&1
pack
(time timeout 120 $K run gdn-recurrence --out /tmp/r/rec) > /tmp/r/rec.log 2>&1
pack
V='*cols=32,rows=8,pdl=early|*cols=32,rows=8,pdl=ahead'
(time timeout 60 $K run gdn-recurrence --set batch=1 --variants "$V" --timing stream --trace --out /tmp/r/rec-trace) > /tmp/r/rec-trace.log 2>&1
(time timeout 60 $K run gdn-recurrence --hot --set batch=1 --out /tmp/r/rec-hot) > /tmp/r/rec-hot.log 2>&1
pack
