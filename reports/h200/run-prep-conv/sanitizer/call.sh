mkdir -p /tmp/kb && tar xzf .carry/bin.tgz -C /tmp/kb
S=/usr/local/cuda/bin/compute-sanitizer
T='*prep=conv*'
( time KLAB_SANITIZE=1 timeout 85 $S --tool racecheck --print-limit 50 /tmp/kb/bin/klab_gpu_tests -tc="$T" ) > $OUT/racecheck.log 2>&1
( time KLAB_SANITIZE=1 timeout 85 $S --tool memcheck --print-limit 50 /tmp/kb/bin/klab_gpu_tests -tc="$T" ) > $OUT/memcheck.log 2>&1
tail -n 6 $OUT/racecheck.log $OUT/memcheck.log
