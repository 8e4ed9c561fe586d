#!/usr/bin/env bash
# Runs every Go fuzz target of the repository, one after the other, for
# FUZZTIME each (default 30s; any `go test -fuzztime` value), and fails if
# any found a failing input. Targets are found with `go test -list`, so a
# new Fuzz function is picked up without editing this script. A failing
# input is written under the package's testdata/fuzz/FuzzName/, where
# `go test` then runs it as a seed. FUZZFLAGS adds flags (-parallel 1).
# Usage: FUZZTIME=5m bash scripts/fuzz.sh [packages...]   (default both modules: ./... ./service/...)
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-30s}
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./... ./service/...)
failed=()
ran=0
for pkg in $(go list "${pkgs[@]}"); do
	# Only packages with a Fuzz function in a test file are listed.
	dir=$(go list -f '{{.Dir}}' "$pkg")
	grep -qs '^func Fuzz' "$dir"/*_test.go || continue
	for fn in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "== $pkg $fn ($fuzztime)"
		ran=$((ran + 1))
		# shellcheck disable=SC2086
		if ! go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$fuzztime" ${FUZZFLAGS:-} "$pkg"; then
			failed+=("$pkg $fn")
		fi
	done
done
echo "fuzz: $ran targets, ${#failed[@]} failed"
if [ ${#failed[@]} -gt 0 ]; then
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
