# call 50 (eleventh session): rungs 103 and 104 (ilp=3 and row-split=2 on one block an SM) alone at the seed shapes,
# beside rung 85 (pace=1, xprep=warps) and rung 98 (per-sm=1) and the cuBLAS peers: a ladder slice.
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > /tmp/r/smi50.txt 2>&1
SLICE='*xprep=warps,load=bulk,pace=1,pdl=on,rows=8|*pace=1,per-sm=1,pdl=on,rows=8|*ilp=3,per-sm=1*|*row-split=2,per-sm=1*|*impl=cublas*'
(time timeout 150 $K run q4-to-ceiling --timing stream --variants "$SLICE" --out /tmp/r/slice) > /tmp/r/slice.log 2>&1
find /tmp/r -name report.jsonl -exec gzip -f {} \; ; find /tmp/r -name 'report-*.csv' -delete
tar czf $OUT/r.tgz -C /tmp r
grep -h "stream" /tmp/r/slice.log | grep "time" | cut -c1-260 | head -40; tail -n 3 /tmp/r/slice.log
