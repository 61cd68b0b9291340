#!/bin/sh
# Runs after the package's files are in place (deb postinst, rpm %post).
set -e
# Let a running systemd see the new or changed unit. Running instances keep
# the old binary until restarted: a restart hands over leadership, so it is
# the operator's to schedule (systemctl restart 'leaderrun@*').
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
