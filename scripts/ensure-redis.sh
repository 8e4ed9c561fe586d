#!/usr/bin/env bash
# ensure-redis.sh makes sure redis-server and redis-cli are on PATH, which the
# integration tests need: they start their own servers on free ports of
# 127.0.0.1. As root it installs Debian's redis-server package; otherwise it
# says how to and fails.
#
# Installing the package may also start a system redis on port 6379 through
# its init scripts. The tests do not use it, and this script leaves it alone.
set -euo pipefail

have_redis() {
	command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1
}

if ! have_redis; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "ensure-redis: redis-server and redis-cli are needed on PATH for the tests." >&2
		echo "ensure-redis: install them with: sudo apt-get install redis-server" >&2
		exit 1
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "ensure-redis: redis-server is missing and apt-get is not available;" >&2
		echo "ensure-redis: install Redis 6.2 or later so that redis-server and redis-cli are on PATH." >&2
		exit 1
	fi
	echo "ensure-redis: installing redis-server with apt-get"
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server
	if ! have_redis; then
		echo "ensure-redis: redis-server or redis-cli still not on PATH after installing" >&2
		exit 1
	fi
fi

echo "ensure-redis: $(redis-server --version)"
