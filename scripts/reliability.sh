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
	echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores, $(redis-server --version | awk '{print $3}'), $(go version | awk '{print $3}'), 4 nodes (limiters with a client each) sharing one Redis, goroutines deciding in a closed loop, store deadline 50 ms; keys limited by sliding_window: \`hot\` 40,000/h, \`spent\` 500/h exhausted before the load starts."
	echo
	table outage "| fault | callers | policy | decisions | during the outage | \`hot\` admitted during it | \`hot\` above its limit at the outage's end | \`hot\` above its limit at the run's end | units charged / unconfirmed | \`spent\` admitted during it | p99 latency during it | answered after the caller's deadline | first decision on Redis after it ended | errors |" "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	table cluster "Cluster: 3 masters + 3 replicas, cluster-node-timeout 1000 ms, a master SIGKILLed under load from 4 nodes, policy local, 12 keys of 3000/h (share 750)." "" "| decisions | during the failover | failover as callers see it | p99 latency during it | above the limit at the failover's end, all keys | of which on the killed master's keys | above the limit at the run's end, all keys | units charged / unconfirmed | errors |" "|---|---|---|---|---|---|---|---|---|"
	table failover "Cluster failover: 32 callers writing to 12 keys of a 3+3 Cluster, a master SIGKILLed, the acknowledged admissions of its keys compared with what the promoted replica counts." "" "| acknowledged on the killed master's keys | their rate before the kill (/s) | lost by the failover | as time of that traffic |" "|---|---|---|---|"
	table wait "WAIT 1 100 after each decision, a master with one replica on loopback: one caller's latency (2,000 decisions), 32 callers' throughput (1 s)." "" "| call | p50 | p99 | decisions/s, 32 callers |" "|---|---|---|---|"
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
