#!/bin/sh
# usage: replicas.sh ROUNDS COUNT BENCHTIME bin[@args] ...   (args: _ for spaces, e.g. @-batch_1)
# BenchmarkReplicas of each pgstore test binary (go test -c), interleaved.
# Each round runs every binary once, interleaved, with -test.count COUNT:
# inside one run the four sub-benchmarks alternate COUNT times, so the
# 3-replica/1-replica ratio is taken between neighbouring windows.
: "${CUSTOS_TEST_POSTGRES_DSN:?set CUSTOS_TEST_POSTGRES_DSN}"
rounds=$1; count=$2; bt=$3; shift 3
out=$(mktemp)

for r in $(seq $rounds); do
  for spec in "$@"; do
    bin=${spec%%@*}; args=""; name=$(basename $bin)
    case "$spec" in *@*) args=$(echo "${spec#*@}" | sed 's/_/ /g'); name="$name ${spec#*@}";; esac
    echo "round $r $name load $(cut -d' ' -f1 /proc/loadavg)" >&2
    $bin -test.run '^$' -test.bench Replicas -test.benchtime $bt -test.count $count $args 2>&1 | grep '^BenchmarkReplicas' | \
      awk -v n="$(echo $name | tr ' ' '+')" -v r=$r '{print n, r, $1, $(NF-1)}' >> $out
  done
done
python3 - $out <<'PY'
import sys,statistics,collections
rows=[l.split() for l in open(sys.argv[1])]
seen=collections.Counter(); d=collections.defaultdict(list); it={}
for n,r,b,v in rows:
    b=b.replace('BenchmarkReplicas/','').rsplit('-',1)[0]
    k=(n,r,b); seen[k]+=1
    d[(n,b)].append(float(v)); it[(n,r,seen[k],b)]=float(v)
for (n,b),v in sorted(d.items()):
    print(f"{n:32s} {b:26s} median {statistics.median(v):6.0f}  n={len(v)}")
for n in sorted({k[0] for k in it}):
    for w in (8,24):
        rs=[it[k]/it[(k[0],k[1],k[2],f'replicas=1/workers={w}')] for k in it if k[0]==n and k[3]==f'replicas=3/workers={w}' and (k[0],k[1],k[2],f'replicas=1/workers={w}') in it]
        if rs: print(f"{n:32s} ratio 3rep/1rep workers={w:<3d} median {statistics.median(rs):.2f}  ({' '.join('%.2f'%x for x in rs)})")
PY
