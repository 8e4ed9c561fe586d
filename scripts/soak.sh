#!/usr/bin/env bash
# Soak: runs resilient's TestSoak (real redis-server processes on
# 127.0.0.1, not in make test) for a long time: key churn, a Redis restart
# and a Cluster failover in turn every few minutes; checks no caller error,
# flat Go heap, goroutines and Redis used_memory; reports how far keys went
# above their limits.
# Usage: bash scripts/soak.sh [-d 30m] [-e 2m]   (-d duration, -e fault interval)
set -euo pipefail
cd "$(dirname "$0")/.."
duration=30m
every=2m
while getopts "d:e:" opt; do
	case $opt in
	d) duration=$OPTARG ;;
	e) every=$OPTARG ;;
	*) echo "usage: $0 [-d duration] [-e fault interval]" >&2; exit 2 ;;
	esac
done
bash scripts/ensure-redis.sh >/dev/null
# Seconds of a duration of the form 90s, 5m, 1h (for the test's timeout).
seconds() {
	case $1 in
	*h) echo $((${1%h} * 3600)) ;;
	*m) echo $((${1%m} * 60)) ;;
	*s) echo "${1%s}" ;;
	*) echo "soak: duration $1: want a whole number of s, m or h" >&2; exit 2 ;;
	esac
}
secs=$(seconds "$duration")
seconds "$every" >/dev/null
REDLIMIT_SOAK=$duration REDLIMIT_SOAK_EVERY=$every go test -count=1 -run '^TestSoak$' -timeout "$((secs + 600))s" -v ./resilient/ 2>&1 |
	grep -v 'redlimit: circuit breaker\|charging what was counted' | grep 'soak\|--- \|^ok\|FAIL\|Error\|error'
