#!/bin/sh
# Runs after the package's files are gone (deb postrm, rpm %postun).
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
