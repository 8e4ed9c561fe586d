#!/usr/bin/env bash
# ensure-statsd.sh installs the statsd daemon (npm's statsd, run by node)
# that the statsd tests of service/internal/server start on free ports of
# 127.0.0.1. It goes to REDLIMIT_STATSD_DIR, by default
# ~/.cache/redlimit/statsd, outside the repository. Node and npm must be on
# PATH; as root the script installs Debian's nodejs and npm if they are not.
set -euo pipefail

dir="${REDLIMIT_STATSD_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/redlimit/statsd}"
version=0.9.0

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "ensure-statsd: node and npm are needed on PATH; install them with: sudo apt-get install nodejs npm" >&2
		exit 1
	fi
	echo "ensure-statsd: installing nodejs and npm with apt-get"
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm
fi

if [ ! -f "$dir/node_modules/statsd/stats.js" ]; then
	echo "ensure-statsd: installing statsd@$version into $dir"
	mkdir -p "$dir"
	npm install --prefix "$dir" --no-audit --no-fund "statsd@$version" >/dev/null
fi
echo "ensure-statsd: $dir/node_modules/statsd/stats.js"
