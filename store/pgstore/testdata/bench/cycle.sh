#!/bin/sh
# usage: cycle.sh ROUNDS bin...
# BenchmarkCycle -pending 1000 of each pgstore test binary, interleaved; medians.
: "${CUSTOS_TEST_POSTGRES_DSN:?set CUSTOS_TEST_POSTGRES_DSN}"
rounds=$1; shift
out=$(mktemp)
for r in $(seq $rounds); do for bin in "$@"; do
  echo "round $r $(basename $bin) load $(cut -d' ' -f1 /proc/loadavg)" >&2
  $bin -test.run '^$' -test.bench Cycle -test.benchtime 2s -pending 1000 2>&1 | grep ^BenchmarkCycle | awk -v n=$(basename $bin) '{print n, $1, $(NF-1)}' >> $out
done; done
python3 - $out <<'PY'
import sys,statistics,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    n,b,v=l.split(); d[(b.replace('BenchmarkCycle/','').rsplit('-',1)[0],n)].append(float(v))
for (b,n),v in sorted(d.items()):
    print(f"{b:28s} {n:14s} median {statistics.median(v):6.0f}  ({' '.join('%.0f'%x for x in v)})")
PY
