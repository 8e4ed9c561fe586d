#!/usr/bin/env bash
# ensure-chromium.sh makes sure Chromium is at /usr/bin/chromium, where the
# dashboard's browser test (service/internal/server, TestDashboardBrowser) starts it
# in headless mode. As root it installs Debian's chromium package; otherwise it
# says how to and fails.
set -euo pipefail

chromium=/usr/bin/chromium

if [ ! -x "$chromium" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "ensure-chromium: $chromium is needed for the dashboard's browser test." >&2
		echo "ensure-chromium: install it with: sudo apt-get install chromium" >&2
		exit 1
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "ensure-chromium: $chromium is missing and apt-get is not available;" >&2
		echo "ensure-chromium: install Chromium so that $chromium runs it." >&2
		exit 1
	fi
	echo "ensure-chromium: installing chromium with apt-get"
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
	if [ ! -x "$chromium" ]; then
		echo "ensure-chromium: $chromium still missing after installing" >&2
		exit 1
	fi
fi

# Debian's /usr/bin/chromium is a wrapper script; its version line is enough.
echo "ensure-chromium: $("$chromium" --version 2>/dev/null | head -n 1)"
