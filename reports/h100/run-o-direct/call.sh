mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi.txt 2>&1
(time timeout 100 /tmp/kb/bin/klab_gpu_tests -tc='gdn_recurrence o=direct*,gdn_recurrence stage=smem and pdl=ahead*') > /tmp/r/gpu-od.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-od.log
pack
for cr in "32 16 --o=direct" "32 16 " "32 8 --o=direct" "32 8 " "16 8 --o=direct" "16 8 "; do set -- $cr
  timeout 30 $K probe-rec --cols $1 --rows $2 $3 >> /tmp/r/probe-rec.jsonl 2>> /tmp/r/probe-rec.err; echo "$1x$2 $3 rc=$?" >> /tmp/r/probe-rec.err; done
pack
(time timeout 120 $K run gdn-recurrence --out /tmp/r/rec) > /tmp/r/rec.log 2>&1
pack
