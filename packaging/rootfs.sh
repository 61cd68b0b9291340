#!/bin/sh
# The container image's root filesystem, as the image has it, in DIR:
#
#   sh packaging/rootfs.sh DIR
#
#   /leaderrun                          the static binary (make build: stripped, leaderrun-init embedded)
#   /etc/ssl/certs/ca-certificates.crt  CA certificates, for TLS to the store and the API server
#   /etc/passwd, /etc/group             the user and group nonroot, 65532
#   /tmp                                1777
#   /var/lib/leaderrun                  0700, the default SQLite store's directory (65532's when run as root)
#
# packaging/Dockerfile builds the image's tree with this script, so that
# the two cannot lay it out differently; CI runs it without Docker and
# runs leaderrun in the tree as a pod would (e2e's TestKubeImageRunsAsAPod).
# GOOS, GOARCH and VERSION choose the binary's platform and version (make
# build's defaults: this machine's, git describe). It needs Go, make and
# the CA certificates of the machine it runs on.
set -eu
out=${1:?usage: rootfs.sh DIR}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)

make -C "$repo" --no-print-directory build OUT="$out/leaderrun" ${VERSION:+VERSION="$VERSION"}
mkdir -p "$out/etc/ssl/certs" "$out/tmp" "$out/var/lib/leaderrun"
cp /etc/ssl/certs/ca-certificates.crt "$out/etc/ssl/certs/"
echo 'nonroot:x:65532:65532:nonroot:/var/lib/leaderrun:/sbin/nologin' >"$out/etc/passwd"
echo 'nonroot:x:65532:' >"$out/etc/group"
chmod 0755 "$out" "$out/etc" "$out/etc/ssl" "$out/etc/ssl/certs" "$out/var" "$out/var/lib"
chmod 0644 "$out/etc/ssl/certs/ca-certificates.crt" "$out/etc/passwd" "$out/etc/group"
chmod 1777 "$out/tmp"
chmod 0700 "$out/var/lib/leaderrun"
if [ "$(id -u)" = 0 ]; then
	chown 65532:65532 "$out/var/lib/leaderrun"
fi
