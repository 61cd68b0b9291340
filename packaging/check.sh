#!/usr/bin/env bash
# The packaging check: validate .goreleaser.yaml, build a snapshot release
# for linux/amd64, install its deb on this machine, run the installed
# leaderrun for real, verify the systemd unit, then purge the package.
#
#   bash packaging/check.sh
#
# It needs root and dpkg (Debian), Go, and goreleaser, which it installs into
# a cache directory on first use. Any failed step fails the check.
set -euo pipefail
cd "$(dirname "$0")/.."

goreleaser_version=v2.15.1
cache="${XDG_CACHE_HOME:-$HOME/.cache}/leaderrun-ci"
export PATH="$cache/bin:$PATH"

step() { printf '\n== %s\n' "$*"; }
fail() {
	echo "check: FAIL: $*" >&2
	exit 1
}

[[ $(id -u) == 0 ]] || fail "must run as root (it installs the deb)"
command -v dpkg >/dev/null || fail "needs dpkg"

step "goreleaser $goreleaser_version"
have_version() {
	[[ -x $cache/bin/goreleaser ]] &&
		go version -m "$cache/bin/goreleaser" | grep "^[[:space:]]*mod[[:space:]]*github.com/goreleaser/goreleaser/v2[[:space:]]*${goreleaser_version}[[:space:]]" >/dev/null
}
if have_version; then
	echo "cached in $cache/bin"
else
	echo "installing into $cache/bin (a few minutes, once)"
	GOBIN="$cache/bin" go install "github.com/goreleaser/goreleaser/v2@$goreleaser_version"
	have_version || fail "goreleaser $goreleaser_version not installed"
fi

step "goreleaser check"
goreleaser check

step "snapshot release, linux/amd64 only"
LEADERRUN_PKG_CHECK=1 goreleaser release --snapshot --clean --skip=publish,docker
version=$(sed -n 's/.*"version":"\([^"]*\)".*/\1/p' dist/metadata.json)
[[ -n $version && $version == *snapshot* ]] || fail "no snapshot version in dist/metadata.json: $version"
debs=(dist/leaderrun_*_amd64.deb)
[[ ${#debs[@]} == 1 && -f ${debs[0]} ]] || fail "expected one amd64 deb in dist/, found: ${debs[*]}"
deb=${debs[0]}

# Remove a package left by an interrupted run of this check; refuse to touch
# one installed for real.
installed=$(dpkg-query -W -f='${db:Status-Status} ${Version}' leaderrun 2>/dev/null || true)
case $installed in
"" | not-installed* | config-files*) ;;
*snapshot*)
	echo "removing a leftover snapshot package ($installed)"
	dpkg --purge leaderrun
	;;
*) fail "a leaderrun package is installed ($installed); the check would replace it" ;;
esac
if [[ -e /usr/bin/leaderrun ]]; then
	fail "/usr/bin/leaderrun exists and belongs to no package; the check would overwrite it"
fi

tmp=$(mktemp -d)
cleanup() {
	local rc=$?
	if dpkg-query -W leaderrun >/dev/null 2>&1; then
		echo "purging the package"
		dpkg --purge leaderrun >/dev/null || rc=1
	fi
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT

step "dpkg -i $deb"
dpkg -i "$deb"
for f in /usr/bin/leaderrun \
	/usr/lib/systemd/system/leaderrun@.service \
	/etc/leaderrun/example.env \
	/usr/share/man/man1/leaderrun.1.gz \
	/usr/share/leaderrun/grafana/leaderrun.json \
	/usr/share/bash-completion/completions/leaderrun \
	/usr/share/zsh/vendor-completions/_leaderrun \
	/usr/share/fish/vendor_completions.d/leaderrun.fish \
	/usr/share/doc/leaderrun/copyright; do
	[[ -s $f ]] || fail "$f not installed"
done
dpkg-query -W -f='${Conffiles}\n' leaderrun | grep '^ /etc/leaderrun/example.env ' >/dev/null ||
	fail "/etc/leaderrun/example.env is not a conffile"

step "leaderrun version"
got=$(/usr/bin/leaderrun version)
echo "$got"
[[ $got == "leaderrun $version" ]] || fail "version prints \"$got\", want \"leaderrun $version\""

step "leaderrun --once through the installed binary"
# The child must see a numeric fencing token and none of leaderrun's options;
# its exit status must come back.
rc=0
# shellcheck disable=SC2016 # the child's shell expands them
timeout 60 /usr/bin/leaderrun --name pkgcheck --store "sqlite:$tmp/x.db" --once -- \
	sh -c 'case $LEADERRUN_TOKEN in "" | *[!0-9]*) exit 1 ;; esac; test -z "$LEADERRUN_STORE"' || rc=$?
[[ $rc == 0 ]] || fail "leaderrun --once (token check) exited $rc, want 0"
rc=0
LEADERRUN_STORE="sqlite:$tmp/x.db" timeout 60 /usr/bin/leaderrun --name pkgcheck --once -- sh -c 'exit 3' || rc=$?
[[ $rc == 3 ]] || fail "leaderrun --once -- sh -c 'exit 3' exited $rc, want 3"
echo "ok: token seen, exit status passed through"

step "every store is built in"
# A build without the Kubernetes store would say: unknown scheme "k8s".
out=$(/usr/bin/leaderrun status --store "k8s://pkgcheck?kubeconfig=$tmp/no-kubeconfig" 2>&1) && fail "status on a missing kubeconfig succeeded: $out"
[[ $out == *"open kubernetes store"* ]] || fail "the installed binary has no Kubernetes store: $out"
echo "ok: k8s:// opens the Kubernetes store"

step "systemd unit"
if command -v systemd-analyze >/dev/null; then
	man_check=--man=yes
	command -v man >/dev/null || man_check=--man=no
	out=$(systemd-analyze verify "$man_check" /usr/lib/systemd/system/leaderrun@.service 2>&1) ||
		fail "systemd-analyze verify: $out"
	[[ -z $out ]] || fail "systemd-analyze verify: $out"
	echo "ok: systemd-analyze verify ($man_check)"
else
	echo "SKIPPED: systemd-analyze is not installed here"
fi

step "man page and completions"
if command -v man >/dev/null; then
	out=$(MANWIDTH=80 man --warnings=w -l /usr/share/man/man1/leaderrun.1.gz 2>&1 >/dev/null) ||
		fail "man: $out"
	[[ -z $out ]] || fail "man page warnings: $out"
	echo "ok: man page renders without warnings"
fi
bash -n /usr/share/bash-completion/completions/leaderrun
echo "ok: bash completion parses"
for shell in zsh fish; do
	file=/usr/share/zsh/vendor-completions/_leaderrun
	[[ $shell == fish ]] && file=/usr/share/fish/vendor_completions.d/leaderrun.fish
	if command -v "$shell" >/dev/null; then
		"$shell" -n "$file"
		echo "ok: $shell completion parses"
	else
		echo "skipped: $shell is not installed"
	fi
done

step "dpkg --purge leaderrun"
dpkg --purge leaderrun
for f in /usr/bin/leaderrun /usr/lib/systemd/system/leaderrun@.service /etc/leaderrun/example.env; do
	[[ ! -e $f ]] || fail "$f left behind after purge"
done

step "artefacts ($version)"
find dist -maxdepth 2 -type f \( -name 'leaderrun*' -o -name checksums.txt \) -printf '%s\t%p\n' |
	sort -k2 | numfmt --field=1 --to=iec-i --suffix=B --padding=9
echo
echo "check: packaging OK"
