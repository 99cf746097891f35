#!/bin/sh
# Install the Debian 12 packages wstore needs.  As root this runs apt-get;
# otherwise it prints the apt-get line to run.
#   sh scripts/deps.sh build   what building every part of wstore needs
#                              (make demo runs this: no servers, no torch);
#                              lowdown makes the man pages
#   sh scripts/deps.sh deb     that plus what `make deb` needs: debhelper,
#                              dh-python, lintian
#   sh scripts/deps.sh test    all of that plus what the test suites run:
#                              Redis, numpy and torch, FUSE, curl, node and
#                              npm; systemd (systemd-analyze), man-db,
#                              bash-completion, zsh, python3-venv and
#                              python3-wheel-whl (the deploy suite);
#                              iproute2 (network namespaces), xfsprogs (a
#                              reflink filesystem), gnuplot-nox (plots),
#                              strace (the whole suite sees the
#                              copy calls), openssl (the redis-tls suite makes its
#                              certificates with it)
#                              (make test runs this; the default)
BUILD_PKGS="meson ninja-build pkg-config gcc libc6-dev libssl-dev \
libjansson-dev libhiredis-dev libfuse3-dev libmicrohttpd-dev libgnutls28-dev \
libcurl4-openssl-dev python3 lowdown"
DEB_PKGS="dpkg-dev debhelper dh-python lintian fakeroot"
TEST_PKGS="redis-server redis-tools python3-numpy python3-torch fuse3 curl \
systemd man-db bash-completion zsh python3-venv python3-wheel-whl iproute2 \
xfsprogs gnuplot-nox openssl strace"
case ${1:-test} in
build) PKGS=$BUILD_PKGS ;;
deb) PKGS="$BUILD_PKGS $DEB_PKGS" ;;
test) PKGS="$BUILD_PKGS $DEB_PKGS $TEST_PKGS" ;;
*)
	echo "deps: unknown profile '$1' (build, deb or test)" >&2
	exit 2
	;;
esac
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
# node and npm run the Hugging Face JS client in the serve-hub suite; a
# node installed some other way, with its own npm, will do
if [ "${1:-test}" = test ] && ! command -v npm >/dev/null; then
	missing="$missing nodejs npm"
fi
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
