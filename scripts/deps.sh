#!/bin/sh
# Install the Debian 12 packages wstore needs to build and test.  As root
# this runs apt-get; otherwise it prints the apt-get line to run.
PKGS="meson ninja-build pkg-config gcc libc6-dev libssl-dev libjansson-dev \
libhiredis-dev redis-server redis-tools python3 python3-numpy fuse3 libfuse3-dev \
python3-torch libmicrohttpd-dev curl"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
# node and npm run the Hugging Face JS client in the serve-hub suite; a
# node installed some other way, with its own npm, will do
command -v npm >/dev/null || missing="$missing nodejs npm"
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
	echo "deps: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq $missing >/dev/null ||
		{ echo "deps: apt-get install failed" >&2; exit 1; }
else
	echo "deps: missing packages; run as root:" >&2
	echo "  apt-get install -y$missing" >&2
	exit 1
fi
