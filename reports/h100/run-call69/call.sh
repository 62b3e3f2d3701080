# call 69 (fifteenth session): rungs 121, 122 (split-k at one block an SM, rows=4, deeper rings), written after call 68's
# stamps. The gpu cases of grid=split-k and of the stamp probe (the new kernels' bits), probe-q4 --grid split-k4 at
# the four seed shapes, a ladder slice (rungs 85, 97, 109, 116, 121, 122) (~2.5 minutes). On an H200 also
# q4-prep-split and gdn-stack (owed since the fourteenth session).
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
pack() { find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi69.txt 2>&1
(time timeout 150 /tmp/kb/bin/klab_gpu_tests -tc='grid=split-k*,the stamp probe*') > /tmp/r/gpu-splitk.log 2>&1; echo "rc=$?" >> /tmp/r/gpu-splitk.log
for s in 6144x5120 5120x6144 10240x5120 17408x5120; do
  for g in split-k4; do
    for p in "" --prepared; do (timeout 30 $K probe-q4 --shape $s --grid $g $p) >> /tmp/r/probe-q4.jsonl 2>> /tmp/r/probe-q4.log; done
  done
done
pack
SLICE='*xprep=warps,load=bulk,pace=1,pdl=on,rows=8|*pace=1,defer=8,pdl=on,rows=4|*defer=8,stages=4,pdl=on,rows=4|*split-k,xprep=chunk,load=bulk,owners=8,stages=2,per-sm=1,pdl=on,rows=8|*split-k,*,per-sm=1,pdl=on,rows=4'
(time timeout 150 $K run q4-to-ceiling --timing stream --variants "$SLICE" --out /tmp/r/slice) > /tmp/r/slice.log 2>&1
pack
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (time timeout 90 $K run q4-prep-split --timing stream --out /tmp/r/prep-split) > /tmp/r/prep-split.log 2>&1
  pack
  (time timeout 150 $K run gdn-stack --out /tmp/r/stack) > /tmp/r/stack.log 2>&1
fi
pack
tail -n 4 /tmp/r/*.log; wc -l /tmp/r/probe-q4.jsonl
