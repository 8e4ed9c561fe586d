#!/usr/bin/env bash
# build.sh builds the redlimit container image from this checkout, with no
# base image pulled from a registry:
#
#   service/deploy/image/build.sh image     # make image: rootfs, then podman (or buildah) build
#   service/deploy/image/build.sh rootfs D  # only assemble the image's files under D
#
# The image (service/deploy/image/Containerfile, FROM scratch) holds:
#   /usr/local/bin/redlimit              CGO_ENABLED=0 -trimpath, stripped: static
#   /bin/ratelimit                       a link to it: invoked so, it serves with
#                                        envoyproxy/ratelimit's environment, the
#                                        command its manifests and Envoy Gateway run
#   /etc/passwd, /etc/group              root, and redlimit as 65532:65532
#   /etc/ssl/certs/ca-certificates.crt   Debian's ca-certificates bundle
#
# IMAGE names the image (default localhost/redlimit:dev). As root, missing podman and
# ca-certificates are installed from Debian's packages.
set -euo pipefail

root=$(cd "$(dirname "$0")/../../.." && pwd)
IMAGE=${IMAGE:-localhost/redlimit:dev}
GO=${GO:-go}
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
USER_ID=65532

need_package() { # need_package COMMAND-OR-FILE PACKAGE
	if [ -e "$1" ] || command -v "$1" >/dev/null 2>&1; then
		return 0
	fi
	if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "build.sh: $1 is missing; install Debian's $2 package (sudo apt-get install $2)" >&2
		exit 1
	fi
	echo "build.sh: installing $2 with apt-get" >&2
	apt-get update >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y "$2" >&2
}

# rootfs DIR assembles the image's files under DIR.
rootfs() {
	local dir=$1
	need_package "$CA_BUNDLE" ca-certificates
	mkdir -p "$dir/usr/local/bin" "$dir/etc/ssl/certs"
	(cd "$root" && CGO_ENABLED=0 GOOS=linux "$GO" build -trimpath -ldflags='-s -w' \
		-o "$dir/usr/local/bin/redlimit" ./service/cmd/redlimit)
	chmod 0755 "$dir/usr/local/bin/redlimit"
	mkdir -p "$dir/bin"
	ln -sfn ../usr/local/bin/redlimit "$dir/bin/ratelimit"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nredlimit:x:%d:%d:redlimit:/nonexistent:/sbin/nologin\n' \
		"$USER_ID" "$USER_ID" >"$dir/etc/passwd"
	printf 'root:x:0:\nredlimit:x:%d:\n' "$USER_ID" >"$dir/etc/group"
	cp "$CA_BUNDLE" "$dir/etc/ssl/certs/ca-certificates.crt"
	chmod 0644 "$dir/etc/passwd" "$dir/etc/group" "$dir/etc/ssl/certs/ca-certificates.crt"
}

image() {
	local builder
	# --layers=false: no intermediate image per instruction, only the image.
	if command -v podman >/dev/null 2>&1; then
		builder=(podman build --layers=false)
	elif command -v buildah >/dev/null 2>&1; then
		builder=(buildah build --layers=false)
	else
		need_package podman podman
		builder=(podman build --layers=false)
	fi
	local revision
	ctx=$(mktemp -d) # global: the EXIT trap runs after image returns
	trap 'rm -rf "$ctx"' EXIT
	rootfs "$ctx/rootfs"
	cp "$root/service/deploy/image/Containerfile" "$ctx/Containerfile"
	revision=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
	# The commit's time stamps the image and its files, so that two builds
	# of one commit are the same image.
	"${builder[@]}" --timestamp "$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)" \
		--build-arg "REVISION=$revision" -f "$ctx/Containerfile" -t "$IMAGE" "$ctx"
	echo "build.sh: built $IMAGE ($revision)"
}

case "${1:-}" in
image) image ;;
rootfs)
	[ -n "${2:-}" ] || { echo "usage: build.sh rootfs DIR" >&2; exit 2; }
	rootfs "$2"
	;;
*)
	echo "usage: build.sh image | build.sh rootfs DIR" >&2
	exit 2
	;;
esac
