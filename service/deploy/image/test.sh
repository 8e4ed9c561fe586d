#!/usr/bin/env bash
# test.sh (make image-test) builds the image and checks it:
#
#  1. the image's configuration: non-root user 65532, entrypoint, addresses;
#  2. its files, exported from a container (podman export): exactly the
#     static binary (CGO_ENABLED=0, -trimpath, no ELF interpreter), passwd
#     and group naming the user, and Debian's CA bundle;
#  3. the binary run from that exported root file system alone (chroot) as
#     65532:65532: --help, and `check` on the example rules and a broken file;
#  4. if this machine can run containers: the container itself, read-only,
#     with every capability dropped: `check` on rules mounted read-only,
#     and `serve` on the host's loopback with Redis, ready, reloading a
#     ConfigMap-style symlink swap, and stopping with exit 0 on SIGTERM.
#
# It needs root (chroot, and podman as root), podman (or buildah, which
# then skips 4), redis-server, curl and python3; where crun cannot run a
# container (this sandbox: "cgroups in hybrid mode not supported"), it
# tries Debian's runc, installing it as root. It removes the image at the
# end unless KEEP_IMAGE is set. It ends with "N passed, M failed" and
# exits non-zero if any check failed.
set -uo pipefail

root=$(cd "$(dirname "$0")/../../.." && pwd)
IMAGE=${IMAGE:-localhost/redlimit:image-test}
USER_ID=65532
passed=0
failed=0
pids=()
work=$(mktemp -d)
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
	[ -n "${cid:-}" ] && podman rm -f "$cid" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

pass() { passed=$((passed + 1)); echo "ok   $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
check() { # check DESCRIPTION COMMAND...: passes when COMMAND succeeds
	local what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}
# expect CODE DESCRIPTION COMMAND...: runs COMMAND, output in $work/out, and
# passes when it exits with CODE.
expect() {
	local code=$1 what=$2
	shift 2
	"$@" >"$work/out" 2>&1
	local got=$?
	if [ "$got" -eq "$code" ]; then
		pass "$what"
	else
		fail "$what: exit $got, want $code"
		sed 's/^/     | /' "$work/out"
	fi
}

if [ "$(id -u)" -ne 0 ]; then
	echo "image-test: run as root (it uses chroot and podman as root)" >&2
	exit 1
fi
for tool in curl redis-server; do
	command -v "$tool" >/dev/null 2>&1 || { echo "image-test: $tool is needed" >&2; exit 1; }
done

# 0. Build.
start=$(date +%s)
if ! IMAGE=$IMAGE bash "$root/service/deploy/image/build.sh" image >"$work/build.log" 2>&1; then
	tail -30 "$work/build.log"
	echo "image-test: the image did not build" >&2
	exit 1
fi
pass "image $IMAGE built in $(($(date +%s) - start)) s"
if command -v podman >/dev/null 2>&1; then
	ctr=podman
else
	ctr=buildah
fi

# 1. Configuration.
cfg=$($ctr inspect --type image --format '{{.Config.User}}|{{json .Config.Entrypoint}}|{{json .Config.Cmd}}|{{json .Config.Env}}' "$IMAGE" 2>&1 ||
	$ctr inspect --type image --format '{{.OCIv1.Config.User}}|{{json .OCIv1.Config.Entrypoint}}|{{json .OCIv1.Config.Cmd}}|{{json .OCIv1.Config.Env}}' "$IMAGE")
IFS='|' read -r user entrypoint cmd env <<<"$cfg"
check "runs as $USER_ID:$USER_ID (got $user)" [ "$user" = "$USER_ID:$USER_ID" ]
check "entrypoint $entrypoint, cmd $cmd" test "$entrypoint" = '["/usr/local/bin/redlimit"]' -a "$cmd" = '["serve"]'
check "listens on every interface by default" grep -q '"HOST=0.0.0.0","GRPC_HOST=0.0.0.0","REDLIMIT_PROBE_ADDR=:8082"' <<<"$env"

# 2. Files, as exported from a container of the image.
rootfs=$work/rootfs
mkdir -p "$rootfs"
if [ "$ctr" = podman ]; then
	cid=$(podman create "$IMAGE") && podman export "$cid" | tar -x -C "$rootfs"
	podman rm "$cid" >/dev/null && cid=
else
	cid=$(buildah from "$IMAGE") && cp -a "$(buildah mount "$cid")/." "$rootfs/"
	buildah rm "$cid" >/dev/null && cid=
fi
files=$(cd "$rootfs" && find . -type f -o -type l | sort | tr '\n' ' ')
check "files: $files" [ "$files" = "./bin/ratelimit ./etc/group ./etc/passwd ./etc/ssl/certs/ca-certificates.crt ./usr/local/bin/redlimit " ]
check "/bin/ratelimit links to the binary" [ "$(readlink "$rootfs/bin/ratelimit")" = ../usr/local/bin/redlimit ]
bin=$rootfs/usr/local/bin/redlimit
buildinfo=$(cd "$root" && go version -m "$bin")
check "binary built with CGO_ENABLED=0" grep -qP '^\tbuild\tCGO_ENABLED=0$' <<<"$buildinfo"
check "binary built with -trimpath" grep -qP '^\tbuild\t-trimpath=true$' <<<"$buildinfo"
if command -v readelf >/dev/null 2>&1; then
	check "binary is static (no ELF interpreter)" bash -c "! readelf -l '$bin' | grep -q INTERP"
fi
check "passwd names redlimit as $USER_ID" grep -qx "redlimit:x:$USER_ID:$USER_ID:redlimit:/nonexistent:/sbin/nologin" "$rootfs/etc/passwd"
check "group names redlimit as $USER_ID" grep -qx "redlimit:x:$USER_ID:" "$rootfs/etc/group"
check "CA bundle is Debian's ca-certificates" cmp -s "$rootfs/etc/ssl/certs/ca-certificates.crt" /etc/ssl/certs/ca-certificates.crt
certs=$(grep -c 'BEGIN CERTIFICATE' "$rootfs/etc/ssl/certs/ca-certificates.crt")
check "CA bundle holds $certs certificates" [ "$certs" -gt 100 ]

# 3. The binary alone in its root file system, as the non-root user.
mkdir -p "$rootfs/etc/redlimit/rules" "$rootfs/etc/redlimit/broken"
cp "$root/examples/config/ratelimit.yaml" "$rootfs/etc/redlimit/rules/"
printf 'domain: api\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n' >"$rootfs/etc/redlimit/broken/api.yaml"
as_user=(chroot --userspec="$USER_ID:$USER_ID" "$rootfs")
expect 0 "chroot, uid $USER_ID: redlimit --help" "${as_user[@]}" /usr/local/bin/redlimit --help
expect 0 "chroot, uid $USER_ID: redlimit check on the example rules" "${as_user[@]}" /usr/local/bin/redlimit check --config /etc/redlimit/rules
check "  it prints the rules" grep -q '^ok: 1 file, 1 domain, 5 rules$' "$work/out"
expect 1 "chroot, uid $USER_ID: redlimit check on a broken file exits 1" "${as_user[@]}" /usr/local/bin/redlimit check --config /etc/redlimit/broken
check "  naming file:line" grep -q '^/etc/redlimit/broken/api.yaml:4: descriptors\[0\].rate_limit.unit: unknown unit' "$work/out"
# /bin/ratelimit serves, with envoyproxy/ratelimit's environment alone
# (its rule layout: RUNTIME_ROOT/config), until it is stopped.
mkdir -p "$rootfs/srv/runtime_data/current/config"
cp "$root/examples/config/ratelimit.yaml" "$rootfs/srv/runtime_data/current/config/"
env -i PATH="$PATH" HOST=127.0.0.1 PORT=0 GRPC_HOST=127.0.0.1 GRPC_PORT=0 LOG_LEVEL=info LOG_FORMAT=json BACKEND_TYPE=redis \
	REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:1 "${as_user[@]}" /bin/ratelimit >"$work/out" 2>&1
check "chroot, uid $USER_ID: /bin/ratelimit serves as envoyproxy/ratelimit (reads its rules, dials REDIS_URL)" \
	grep -q '"msg":"cannot start".*127.0.0.1:1' "$work/out"

# 4. The container.
if [ "$ctr" != podman ]; then
	echo "skip the container runs: podman is not installed (buildah runs no container here)"
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
fi
# A sandbox may refuse what podman does by default; find the flags that
# run here: crun, then runc, each with the default limits and then with
# lower ones (raising a limit above the runtime's own needs
# CAP_SYS_RESOURCE, which a sandbox may withhold).
limits=(--ulimit "nofile=$(ulimit -n):$(ulimit -n)" --ulimit "nproc=4096:4096")
run=()
for flags in "" "--runtime runc" "LIMITS" "--runtime runc LIMITS"; do
	try=(podman)
	case $flags in *runc*) try+=(--runtime runc) ;; esac
	try+=(run --rm)
	case $flags in *LIMITS*) try+=("${limits[@]}") ;; esac
	if "${try[@]}" --network=none "$IMAGE" --help >"$work/try" 2>&1; then
		run=("${try[@]}")
		break
	fi
	echo "podman run ${flags:-(defaults)}: $(tail -1 "$work/try")"
done
if [ ${#run[@]} -eq 0 ] && ! command -v runc >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
	# Some sandboxes refuse crun (cgroups in hybrid mode) and take runc.
	echo "installing Debian's runc, to try it"
	if apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y runc >/dev/null; then
		try=(podman --runtime runc run --rm "${limits[@]}")
		if "${try[@]}" --network=none "$IMAGE" --help >"$work/try" 2>&1; then
			run=("${try[@]}")
		else
			echo "podman run --runtime runc LIMITS: $(tail -1 "$work/try")"
		fi
	fi
fi
if [ ${#run[@]} -eq 0 ]; then
	echo "skip the container runs: podman cannot run a container here (errors above)"
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
fi
echo "containers run here with: ${run[*]}"
hardened=(--read-only --cap-drop=ALL --security-opt=no-new-privileges)
expect 0 "container: check on rules mounted read-only" "${run[@]}" "${hardened[@]}" --network=none \
	-v "$root/examples/config:/etc/redlimit/rules:ro" "$IMAGE" check --config /etc/redlimit/rules
check "  it prints the rules" grep -q '^ok: 1 file, 1 domain, 5 rules$' "$work/out"

# serve, with Redis on the host's loopback, and rules laid out as a
# ConfigMap volume: rules.yaml -> ..data/rules.yaml, ..data -> ..v1.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >"$work/redis.log" 2>&1 &
pids+=($!)
cm=$work/configmap
mkdir -p "$cm/..v1" "$cm/..v2"
cp "$root/examples/config/ratelimit.yaml" "$cm/..v1/rules.yaml"
cp "$root/examples/config/ratelimit.yaml" "$cm/..v2/rules.yaml"
printf '  - key: added_by_reload\n    rate_limit: {unit: second, requests_per_unit: 1}\n' >>"$cm/..v2/rules.yaml"
ln -s ..v1 "$cm/..data"
ln -s ..data/rules.yaml "$cm/rules.yaml"
chmod -R a+rX "$cm"
serve=("${run[@]/--rm/-d}")
cid=$("${serve[@]}" "${hardened[@]}" --network=host -v "$cm:/etc/redlimit/rules:ro" "$IMAGE" \
	serve --config=/etc/redlimit/rules --redis="redis://127.0.0.1:$port" \
	--grpc-addr=127.0.0.1:0 --http-addr=127.0.0.1:0 --log-format=json --dashboard=false)
http=
for _ in $(seq 100); do
	http=$(podman logs "$cid" 2>&1 | sed -n 's/.*"msg":"serving".*"http":"\([^"]*\)".*/\1/p')
	[ -n "$http" ] && break
	sleep 0.1
done
check "container: serve listens (http $http)" [ -n "$http" ]
ready=$(curl -s "http://$http/readyz")
check "container: /readyz says ready with Redis ($ready)" [ "$ready" = ready ]
check "container: /healthz" curl -sf "http://$http/healthz" -o /dev/null
rules() { curl -s "http://$http/metrics" | sed -n 's/^redlimit_config_rules \([0-9]*\)$/\1/p'; }
check "container: 5 rules loaded" [ "$(rules)" = 5 ]
ln -sfn ..v2 "$cm/..data.tmp" && mv -T "$cm/..data.tmp" "$cm/..data"
for _ in $(seq 100); do
	[ "$(rules)" = 6 ] && break
	sleep 0.1
done
check "container: a ConfigMap-style symlink swap is reloaded (6 rules)" [ "$(rules)" = 6 ]
podman stop -t 20 "$cid" >/dev/null
code=$(podman inspect "$cid" --format '{{.State.ExitCode}}')
check "container: SIGTERM drains and exits 0 (exit $code)" [ "$code" = 0 ]
check "  and logs that it stopped" bash -c "podman logs '$cid' 2>&1 | grep -q '\"msg\":\"stopped\"'"
podman rm "$cid" >/dev/null && cid=
[ -n "${KEEP_IMAGE:-}" ] || podman rmi "$IMAGE" >/dev/null

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
