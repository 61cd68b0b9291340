#!/bin/sh
# Runs before the package's files go (deb prerm, rpm %preun). $1 is "remove"
# (deb) or 0 (rpm) when the package is removed rather than upgraded.
set -e
case "$1" in
remove | 0)
	# Stop the instances gracefully, each releasing its lease, while the
	# binary is still there.
	if [ -d /run/systemd/system ]; then
		systemctl stop 'leaderrun@*.service' || true
	fi
	;;
esac
