#!/usr/bin/env bash
# Runs every comparison benchmark and writes the raw output to results.txt
# beside this script. Needs Go and redis-server on PATH; the Redis benchmarks
# start their own redis-server on a free 127.0.0.1 port and stop it.
#
# Environment:
#   MEM_BENCHTIME    -benchtime of the in-memory benchmarks (default 1s)
#   MEM_COUNT        -count of the in-memory benchmarks (default 6; compare
#                    the medians, e.g. with benchstat)
#   REDIS_BENCHTIME  -benchtime of the Redis benchmarks (default 2s)
#   REDIS_ROUNDS     how many full passes over the Redis cases (default 3);
#                    compare a case with redis_rate within one pass only
set -euo pipefail
cd "$(dirname "$0")"

MEM_BENCHTIME=${MEM_BENCHTIME:-1s}
MEM_COUNT=${MEM_COUNT:-6}
REDIS_BENCHTIME=${REDIS_BENCHTIME:-2s}
REDIS_ROUNDS=${REDIS_ROUNDS:-3}

command -v redis-server >/dev/null || { echo "run.sh: redis-server is not on PATH" >&2; exit 1; }

{
	echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "# redlimit $(git -C .. rev-parse --short HEAD 2>/dev/null || echo '?')"
	echo "# modified since: $(git -C .. status --porcelain -- . ':!bench' ':!docs' 2>/dev/null | awk '{print $2}' | tr '\n' ' ')"
	echo "# $(go version)"
	echo "# $(redis-server --version)"
	echo "# $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
	echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
	go test -c -o bench.test .
	trap 'rm -f bench.test' EXIT

	echo
	echo "## In-process stores, allow path (-cpu 1,2)"
	./bench.test -test.run '^$' -test.bench '^BenchmarkMemory$' -test.benchmem \
		-test.cpu 1,2 -test.benchtime "$MEM_BENCHTIME" -test.count "$MEM_COUNT"

	for round in $(seq 1 "$REDIS_ROUNDS"); do
		echo
		echo "## Redis, 64 callers, 10,000 keys: round $round of $REDIS_ROUNDS (-cpu 2)"
		./bench.test -test.run '^$' -test.bench '^BenchmarkRedis$' -test.benchmem \
			-test.cpu 2 -test.benchtime "$REDIS_BENCHTIME" -test.count 1
	done

	echo
	echo "## Redis Cluster, three masters: spread keys and one hot key (-cpu 2)"
	./bench.test -test.run '^$' -test.bench '^BenchmarkRedisCluster$' -test.benchmem \
		-test.cpu 2 -test.benchtime "$REDIS_BENCHTIME" -test.count 1

	echo
	echo "## Redis memory per key"
	./bench.test -test.run '^$' -test.bench '^BenchmarkRedisMemoryPerKey$' \
		-test.cpu 2 -test.benchtime 1x -test.count 1
	echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
} 2>&1 | tee results.txt
