#!/bin/sh
# version.sh - the version of a build (meson.build's vcs_tag, deb.sh):
#   sh scripts/version.sh RELEASE [SRCDIR]
# prints RELEASE+N.gSHA for a git tree (N commits to HEAD, SHA its first
# 12 hex digits, ".dirty" appended when tracked files differ from HEAD),
# so that two commits never print the same and a later commit sorts
# later (dpkg --compare-versions); else the VERSION file of SRCDIR (which
# deb.sh writes into the tree it builds, a copy without .git); else
# RELEASE alone.
set -eu
release=$1
root=$(cd "${2:-$(dirname "$0")/..}" && pwd -P)
if [ -f "$root/VERSION" ]; then
	head -n1 "$root/VERSION"
	exit 0
fi
top=$(git -C "$root" rev-parse --show-toplevel 2>/dev/null || true)
if [ -n "$top" ] && [ "$(cd "$top" && pwd -P)" = "$root" ]; then
	n=$(git -C "$root" rev-list --count HEAD)
	sha=$(git -C "$root" rev-parse --short=12 HEAD)
	dirty=
	git -C "$root" diff --quiet HEAD -- 2>/dev/null || dirty=.dirty
	echo "$release+$n.g$sha$dirty"
	exit 0
fi
echo "$release"
