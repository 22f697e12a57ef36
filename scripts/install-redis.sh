#!/usr/bin/env bash
# Installs redis-server from the Debian (or Ubuntu) package, for the tests
# of the Redis stores, which start real servers. Runs apt-get as root, or
# through sudo for another user; fails, saying so, when neither can.
set -euo pipefail
if command -v redis-server >/dev/null; then
	exit 0
fi
if ! command -v apt-get >/dev/null; then
	echo "install-redis: redis-server is missing and this is not a Debian system: install Redis 7 (or Valkey) so that redis-server is on PATH" >&2
	exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
	if ! command -v sudo >/dev/null; then
		echo "install-redis: redis-server is missing; run as root, or install sudo, to apt-get install redis-server" >&2
		exit 1
	fi
	sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
$sudo apt-get install -y --no-install-recommends redis-server
command -v redis-server >/dev/null
