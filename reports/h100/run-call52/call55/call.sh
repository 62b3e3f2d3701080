# call 55 (twelfth session): the refactored gpu cases (GDN span, GDN step candidate) on any card; then, on an H200, issue 13's reading at the 17.7 MB shapes (q4-prep-split: the
# main kernels on x prepared by its producer, the prep launch's cost; the paced ring's probe after its prep launch and on
# prepared x; Nsight Compute on rungs 85 and 97); on any other card nothing (call 52 ran all of it on an H100).
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi55.txt 2>&1
(time timeout 120 /tmp/kb/bin/klab_gpu_tests -tc="GDN span*,GDN step candidate*") > /tmp/r/gpu.log 2>&1; echo "rc=$?" >> /tmp/r/gpu.log
pack
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (time timeout 90 $K run q4-prep-split --timing stream --out /tmp/r/prep-split) > /tmp/r/prep-split.log 2>&1
  for s in 6144x5120 5120x6144; do
    for p in "" --prepared; do (timeout 30 $K probe-q4 --shape $s --grid paced $p) >> /tmp/r/probe.log 2>&1; done
  done
  pack
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy"
  V85='q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,pace=1,pdl=on,rows=8'
  V97='q4_gemv/map=packed,dot=q8-dp4a,grid=fill,xprep=warps,load=bulk,pace=1,defer=8,pdl=on,rows=4'
  (timeout 60 $NCU --clock-control none --profile-from-start off -k regex:packed_paced_kernel $S --csv --page details $K profile-one $V85 --shape 6144x5120) > /tmp/r/ncu_85.csv 2> /tmp/r/ncu_85.err
  (timeout 60 $NCU --clock-control none --profile-from-start off -k regex:packed_paced_kernel $S --csv --page details $K profile-one $V97 --shape 5120x6144) > /tmp/r/ncu_97.csv 2> /tmp/r/ncu_97.err
else
  echo "not an H200: nothing run" > /tmp/r/skip.log
fi
pack
tail -n 3 /tmp/r/*.log
