# call 49 (eleventh session): Nsight Compute on the span alone (each kernel replayed serially, caches flushed): is it
# slow by itself (its duration for ~65 MB, its DRAM rate, its warps' stalls), against pace_out1's two paced kernels?
mkdir -p /tmp/kb /tmp/r && tar xJf .carry/bin.txz -C /tmp/kb
K=/tmp/kb/bin/klab
export KLAB_CLI=$K
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" > /tmp/r/ncu.log
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy"
(time timeout 200 $NCU --clock-control none -k regex:packed_span_kernel --launch-skip 8 -c 3 $S --csv --page details \
   $K run gdn-step-fused --variants '*fold=ba,span=2' --out /tmp/r/span2) > /tmp/r/ncu_span2.csv 2> /tmp/r/ncu_span2.err
(time timeout 200 $NCU --clock-control none -k regex:packed_paced_kernel --launch-skip 8 -c 4 $S --csv --page details \
   $K run gdn-step-fused --variants '*pace=1+per-sm=1+pdl=on+rows=8*fold=ba' --out /tmp/r/out1) > /tmp/r/ncu_out1.csv 2> /tmp/r/ncu_out1.err
rm -rf /tmp/r/span2 /tmp/r/out1
tar czf $OUT/r.tgz -C /tmp r
tail -n 5 /tmp/r/*.err; grep -h "Duration\|DRAM Throughput\|Stall\|Warp Cycles Per Issued" /tmp/r/ncu_*.csv | cut -c1-220 | head -60
