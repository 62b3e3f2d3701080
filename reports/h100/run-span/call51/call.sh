# call 51 (eleventh session): the whole gpu suite on the session's last binaries (the span's case in it).
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
export KLAB_CLI=/tmp/kb/bin/klab
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi51.txt 2>&1
(time timeout 370 /tmp/kb/bin/klab_gpu_tests) > /tmp/r/gpu-all.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-all.log
tar czf $OUT/r.tgz -C /tmp r
tail -n 8 /tmp/r/gpu-all.log
