#!/bin/sh
# deb.sh - build the Debian packages from this tree (make deb):
#   sh scripts/deb.sh [OUT]      (default OUT: build-deb)
# The tree's files (tracked and new, not ignored) are copied to
# OUT/src/wstore-VERSION and built there with dpkg-buildpackage, so that
# neither the tree nor its parent directory gets build products; the .deb
# files (and the -dbgsym .ddeb ones, the .changes and .buildinfo) end up in
# OUT.  Then lintian checks them (when installed): any error fails.
# No tests run inside the package build (DEB_BUILD_OPTIONS=nocheck).
set -eu
OUT=${1:-build-deb}
cd "$(dirname "$0")/.."
ROOT=$(pwd)
for tool in dpkg-buildpackage dh meson lowdown; do
	command -v $tool >/dev/null || {
		echo "deb: '$tool' is missing: sh scripts/deps.sh deb" >&2
		exit 1
	}
done
# the package's version is the build's (scripts/version.sh: the release
# of debian/changelog plus the git commit), so two commits never make two
# packages of one version, and a later commit upgrades an earlier one
RELEASE=$(dpkg-parsechangelog -S Version)
VERSION=$(sh scripts/version.sh "$RELEASE" .)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SRC="$OUT/src/wstore-$VERSION"
rm -rf "$OUT/src"
mkdir -p "$SRC"
# the tree as git sees it (a build dir or the output dir inside it is
# never copied)
git ls-files -z --cached --others --exclude-standard |
	grep -zv "^$(basename "$OUT")/" |
	(cd "$ROOT" && xargs -0 tar cf - --no-recursion) | tar xf - -C "$SRC"
# meson's build dirs are not git-ignored: leave them out
rm -rf "$SRC"/build "$SRC"/build-*
# the copy has no .git: its version comes from VERSION (scripts/version.sh)
# and the changelog's top entry names it
echo "$VERSION" > "$SRC/VERSION"
sed -i "1s/^wstore ($RELEASE)/wstore ($VERSION)/" "$SRC/debian/changelog"
cd "$SRC"
t0=$(date +%s)
DEB_BUILD_OPTIONS="nocheck parallel=$(nproc) ${DEB_BUILD_OPTIONS:-}" \
	dpkg-buildpackage -b -us -uc >"$OUT/build.log" 2>&1 || {
	tail -30 "$OUT/build.log" >&2
	echo "deb: dpkg-buildpackage failed (log: $OUT/build.log)" >&2
	exit 1
}
cd "$OUT"
rm -f ./*.deb ./*.ddeb ./*.changes ./*.buildinfo
mv src/*.deb src/*.ddeb src/*.changes src/*.buildinfo . 2>/dev/null || true
echo "deb: built in $(($(date +%s) - t0)) s:"
ls -1 ./*.deb ./*.ddeb 2>/dev/null | sed 's|^\./|  |'
if command -v lintian >/dev/null; then
	# errors fail the build; warnings are shown
	lintian --fail-on error --suppress-tags-from-file /dev/null \
		./*.changes >"$OUT/lintian.log" 2>&1 || {
		cat "$OUT/lintian.log" >&2
		echo "deb: lintian found errors" >&2
		exit 1
	}
	cat "$OUT/lintian.log"
	echo "deb: lintian: no errors"
else
	echo "deb: lintian is not installed: not checked"
fi
rm -rf "$OUT/src"
