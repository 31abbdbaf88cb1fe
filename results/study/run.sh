#!/bin/sh
# The study of docs/study.md, the project's commands only. Sweeps go to $WORK (default /tmp/plbjax-study);
# their tables and figures, and the comparison, are copied here (results/study/).
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${WORK:-/tmp/plbjax-study}
mkdir -p "$WORK" && cd "$WORK"
plbjax-generate --nodes 20 --services 12 --partitions-per-service 14 --replicas-per-partition 3 --skew 0.9 --seed 7 -o cluster.json
KEYS="balancing.threshold=1.2,40 search.initial_temperature=1,100 search.seed=0,1,2"
plbjax -m state="$WORK/cluster.json" $KEYS search.steps=2000 progress=false hydra.sweep.dir=parallel
plbjax-baseline -m state="$WORK/cluster.json" $KEYS hydra.sweep.dir=sequential
plbjax-compare parallel sequential --out "$HERE/compare"
for sweep in parallel sequential; do
  mkdir -p "$HERE/$sweep"
  cp "$WORK/$sweep/summary.md" "$WORK/$sweep/summary.csv" "$WORK/$sweep/summary-by-config.csv" \
     "$WORK/$sweep/summary.png" "$WORK/$sweep/jobs.parquet" "$HERE/$sweep/"
done
{ echo "host: $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "plbjax: $(plbjax --version)"; echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"; } > "$HERE/machine.txt"
