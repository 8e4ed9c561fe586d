#!/usr/bin/env bash
# Reruns the fault tests (real redis-server processes on 127.0.0.1) without
# the race detector, and writes their figures into docs/RELIABILITY.md
# between the "figures" markers. Usage: bash scripts/reliability.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh >/dev/null
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
REDLIMIT_RELIABILITY_REPORT="$rows" go test -count=1 -run 'TestFault' -v ./resilient/ >"$rows.log" 2>&1 || {
	tail -50 "$rows.log" >&2
	echo "reliability: the fault tests failed (log: $rows.log)" >&2
	exit 1
}
rm -f "$rows.log"

table() { # name, header lines...
	local name=$1
	shift
	printf '%s\n' "$@"
	grep "^$name	" "$rows" | cut -f2-
	echo
}

figures=$(mktemp)
{
	echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores, $(redis-server --version | awk '{print $3}'), $(go version | awk '{print $3}'), 64 goroutines deciding in a closed loop, deadline 50 ms, 4 nodes assumed for the local share."
	echo
	table outage "| fault | policy | decisions | during the outage | admitted during it | p99 latency during it | first decision on Redis after it ended | errors |" "|---|---|---|---|---|---|---|---|"
	table cluster "Cluster: 3 masters + 3 replicas, cluster-node-timeout 1000 ms, a master SIGKILLed under load, policy local, 12 keys of 3000/h (share 750)." "" "| decisions | during the failover | failover as callers see it | p99 latency during it | admitted above the limit, all keys | of which on the killed master's keys | errors |" "|---|---|---|---|---|---|---|"
	table flush "| fault | client | decisions | errors |" "|---|---|---|---|"
	table settings "| bad setting | time to the error | the error |" "|---|---|---|"
} >"$figures"

awk -v f="$figures" '
	/<!-- figures:begin -->/ { print; while ((getline line < f) > 0) print line; skip = 1; next }
	/<!-- figures:end -->/ { skip = 0 }
	!skip { print }
' docs/RELIABILITY.md >docs/RELIABILITY.md.new
mv docs/RELIABILITY.md.new docs/RELIABILITY.md
rm -f "$figures"
echo "reliability: figures written to docs/RELIABILITY.md"
