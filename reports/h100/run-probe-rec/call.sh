mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi.txt 2>&1
for cr in "32 8 ahead" "32 8 next" "16 8 ahead" "16 8 next" "32 16 ahead" "16 4 ahead" "8 4 ahead"; do set -- $cr
  timeout 30 $K probe-rec --cols $1 --rows $2 --pdl $3 >> /tmp/r/probe-rec.jsonl 2>> /tmp/r/probe-rec.err; echo "$1x$2 $3 rc=$?" >> /tmp/r/probe-rec.err; done
timeout 30 $K probe-rec --cols 32 --rows 8 --batch 32 --launches 16 >> /tmp/r/probe-rec.jsonl 2>> /tmp/r/probe-rec.err; echo "b32 rc=$?" >> /tmp/r/probe-rec.err
pack
(time timeout 90 /tmp/kb/bin/klab_gpu_tests '-tc=*recurrence*') > /tmp/r/gpu-tests.log 2>&1; echo "gpu tests rc=$?" >> /tmp/r/gpu-tests.log
pack
(time timeout 100 $K run gdn-recurrence --out /tmp/r/rec) > /tmp/r/rec.log 2>&1
pack
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (time timeout 100 $K run q4-prep-split --timing stream --out /tmp/r/split) > /tmp/r/split.log 2>&1
  pack
  (time timeout 150 $K run gdn-step-fused gdn-stack --out /tmp/r/gdn) > /tmp/r/gdn.log 2>&1
  pack
fi
