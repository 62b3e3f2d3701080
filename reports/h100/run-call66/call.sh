# call 66 (owed since the fourteenth session): klab probe-cluster (the default sweep: clusters 0, 1, 2, 5, 6, 8, PDL on and
# off, 80 KB at one and two blocks an SM, 0 KB at one), the gpu case of grid=split-k and its fold=last twins and
# probe-cluster's gpu case, a ladder slice with rungs 85, 90, 97, 109, 115-120 and cuBLAS. Then on an H200: q4-prep-split,
# the paced probe at the 17.7 MB shapes, gdn-stack (~5 minutes); on an H100: the whole gpu suite (~5 minutes).
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi66.txt 2>&1
(time timeout 60 $K probe-cluster) > /tmp/r/probe-cluster.jsonl 2> /tmp/r/probe-cluster.log
(time timeout 120 /tmp/kb/bin/klab_gpu_tests -tc='grid=split-k*,probe-cluster*') > /tmp/r/gpu-splitk.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-splitk.log
pack
SLICE='*xprep=warps,load=bulk,pace=1,pdl=on,rows=8|*pace=1,row-split=2,pdl=on,rows=8|*pace=1,defer=8,pdl=on,rows=4|*defer=8,stages=4,pdl=on,rows=4|*grid=split-k*|*impl=cublas*'
(time timeout 120 $K run q4-to-ceiling --timing stream --variants "$SLICE" --out /tmp/r/slice) > /tmp/r/slice.log 2>&1
pack
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (time timeout 90 $K run q4-prep-split --timing stream --out /tmp/r/prep-split) > /tmp/r/prep-split.log 2>&1
  for s in 6144x5120 5120x6144; do
    for p in "" --prepared; do (timeout 30 $K probe-q4 --shape $s --grid paced $p) >> /tmp/r/probe.log 2>&1; done
  done
  pack
  (time timeout 150 $K run gdn-stack --out /tmp/r/stack) > /tmp/r/stack.log 2>&1
else
  (time timeout 330 /tmp/kb/bin/klab_gpu_tests) > /tmp/r/gpu.log 2>&1; echo "rc=$?" >> /tmp/r/gpu.log
fi
pack
cat /tmp/r/probe-cluster.jsonl; tail -n 3 /tmp/r/*.log
