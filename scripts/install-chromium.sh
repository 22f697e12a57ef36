#!/usr/bin/env bash
# Installs Chromium from the Debian package, for the test that approves
# serve --authorize's consent page in a headless browser
# (oauth/tssdk_e2e_test.go). Runs apt-get as root, or through sudo for
# another user; fails, saying so, when neither can.
set -euo pipefail
if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
	exit 0
fi
if ! command -v apt-get >/dev/null; then
	echo "install-chromium: chromium is missing and this is not a Debian system: install Chromium so that chromium is on PATH" >&2
	exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
	if ! command -v sudo >/dev/null; then
		echo "install-chromium: chromium is missing; run as root, or install sudo, to apt-get install chromium" >&2
		exit 1
	fi
	sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
$sudo apt-get install -y --no-install-recommends chromium
command -v chromium >/dev/null
