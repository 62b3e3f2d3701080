# call 62 (thirteenth session). On an H200: call 57's owed readings (q4-prep-split: the main kernels on x prepared by its
# producer and the prep launch's cost; the paced probe after its prep launch and on prepared x), a ladder slice with rungs
# 85, 90, 97, 107-114 and cuBLAS (~5 minutes; gdn-stack with the candidate under its name is left for a later call).
# On an H100: the whole gpu suite on these binaries (grid=own's kernels against their models at every model case).
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi62.txt 2>&1
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (time timeout 500 /tmp/kb/bin/klab_gpu_tests) > /tmp/r/gpu-suite.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-suite.log
  pack; tail -n 8 /tmp/r/gpu-suite.log; exit 0
fi
(time timeout 90 $K run q4-prep-split --timing stream --out /tmp/r/prep-split) > /tmp/r/prep-split.log 2>&1
for s in 6144x5120 5120x6144; do
  for p in "" --prepared; do (timeout 30 $K probe-q4 --shape $s --grid paced $p) >> /tmp/r/probe.log 2>&1; done
done
pack
SLICE='*xprep=warps,load=bulk,pace=1,pdl=on,rows=8|*pace=1,row-split=2,pdl=on,rows=8|*pace=1,defer=8,*rows=4|*per-sm=2,stages=2*|*grid=own*|*impl=cublas*'
(time timeout 110 $K run q4-to-ceiling --timing stream --variants "$SLICE" --out /tmp/r/slice) > /tmp/r/slice.log 2>&1
pack
tail -n 3 /tmp/r/*.log
