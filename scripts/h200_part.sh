#!/usr/bin/env bash
# One device call of the reference run (docs/DEVICE-RUNBOOK.md), on the lent machine, from the repository root:
#   bash scripts/h200_part.sh PART [PART2]      e.g. run-b2, or run-b1 extras (env passes through: GPU_TESTS, RUN2)
# Unpacks .carry/bin.tgz (klab, klab_gpu_tests, libcupti.so.13) into /tmp/kb, runs scripts/h200_reference.sh
# PART (then PART2) into /tmp/ref-PART, gzips the reports and brings everything back as ONE file,
# $OUT/ref-PART.tgz: the device tool returns at most 8 files from $OUT (2026-12-02: a part written straight
# under $OUT came back without its report.jsonl.gz, and 210 s of device time went on running it again).
# Here, after the call: tar xzf ref-PART.tgz; gunzip -k ref-PART/run/report.jsonl.gz (merge_reports.py reads
# report.jsonl); scripts/merge_reports.py --parts OUT ref-run-a/run ref-run-b1/run ref-run-b2/run.
set -u
PART="${1:?usage: scripts/h200_part.sh PART [PART2]}"
: "${OUT:?OUT must name the folder whose files come back}"
mkdir -p /tmp/kb && tar xzf .carry/bin.tgz -C /tmp/kb || { echo "h200_part.sh: cannot unpack .carry/bin.tgz" >&2; exit 2; }
B=/tmp/kb/bin; W=/tmp/ref-$PART
rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$W/smi-$PART.txt" 2>&1
scripts/h200_reference.sh "$B" "$W" "$PART"
if [ -n "${2:-}" ]; then scripts/h200_reference.sh "$B" "$W" "$2"; fi
for f in "$W"/run/report.jsonl "$W"/run2/report.jsonl; do [ -f "$f" ] && gzip -f "$f"; done
tar czf "$OUT/ref-$PART.tgz" -C /tmp "ref-$PART" && ls -la "$OUT"
