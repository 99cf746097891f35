# suite.sh - the one prologue of the e2e scripts (tests/e2e/*.sh).  A
# script sets TAP_SUITE and sources this file as its first action:
#
#   TAP_SUITE=edges
#   . "$(dirname "$0")/../lib/suite.sh"
#
# and gets: set -u; BUILD (default "build"); HERE, the tests/ directory;
# the helpers of tap.sh (checks, tap_skip, tap_done, wait_for, wait_exit);
# W, the wstore binary of $BUILD; T, a fresh temporary directory (mode
# 0755: see suite_share) with a private HOME and WSTORE_HOME and no config
# file; an EXIT trap that calls suite_cleanup, which a script redefines for
# its own teardown (servers, mounts: suite_unmount), and then removes $T
# whatever the modes left in it; INT and TERM end the script through that
# trap.
set -u
BUILD=${BUILD:-build}
HERE=$(cd "$(dirname "$0")/.." && pwd)
. "$HERE/lib/tap.sh"

suite_env "$TAP_SUITE"
chmod 755 "$T"

# suite_cleanup: redefine it for what must go before $T is removed
suite_cleanup() { :; }

_suite_exit() {
	suite_cleanup
	chmod -R u+rwx "$T" ${SHARE:+"$SHARE"} 2>/dev/null
	rm -rf "$T" ${SHARE:+"$SHARE"}
}
trap _suite_exit EXIT
trap 'exit 130' INT TERM

# suite_unmount MNT...: take down each wstore mount among MNT that is still
# up (a cleanup's work): `wstore umount`, else a lazy umount, else
# fusermount3's (a mount left by a killed daemon)
suite_unmount() {
	for _su_m in "$@"; do
		[ -n "$_su_m" ] || continue
		grep -q " $_su_m fuse" /proc/mounts 2>/dev/null || continue
		"$W" umount "$_su_m" 2>/dev/null || umount -l "$_su_m" 2>/dev/null ||
			fusermount3 -u -z "$_su_m" 2>/dev/null
	done
	return 0
}

# suite_need_fuse: the first check of a FUSE suite; without /dev/fuse it
# fails (one not-ok line saying how to get it) and ends the script
suite_need_fuse() {
	[ -c /dev/fuse ] && return 0
	tap_not_ok "/dev/fuse is missing: FUSE tests cannot run (load the fuse module or run the container with --device /dev/fuse)"
	tap_done
	exit 1
}

# suite_mounted MNT: a wstore mount is up at MNT
suite_mounted() { grep -q " $1 fuse.wstore " /proc/mounts; }

# ---- cases run as another user ------------------------------------------
# AS_USER CMD...: run CMD as an unprivileged user (uid and gid 65534)
AS_USER="setpriv --reuid=65534 --regid=65534 --clear-groups"
SHARE=

# suite_share: SHARE, a directory the user of $AS_USER can reach, holding
# copies of the build's wstore, its daemons and libwstore ($WU is the copy
# of wstore), for cases run as that user: the build and $T may sit where
# only root may enter (a clone in a mktemp -d folder; tests/run.sh's
# TMPDIR).  Made under $T when that user can reach it, else under /tmp or
# /var/tmp, and removed on exit.  Returns 1 with the reason in SHARE_WHY
# when there is no such user or place; the caller then counts the cases
# that needed it as skipped (tap_skip NAME "$SHARE_WHY").
suite_share() {
	[ -n "$SHARE" ] && return 0
	SHARE_WHY=
	if [ "$(id -u)" != 0 ]; then
		SHARE_WHY="not root: cannot run a case as another user"
		return 1
	fi
	if ! command -v setpriv >/dev/null; then
		SHARE_WHY="setpriv (util-linux) is not installed"
		return 1
	fi
	for _sb in "$T" /tmp /var/tmp; do
		$AS_USER test -x "$_sb" 2>/dev/null || continue
		SHARE=$(mktemp -d "$_sb/wstore-share-XXXXXX") || continue
		chmod 755 "$SHARE"
		mkdir "$SHARE/bin"
		_sd=$(dirname "$W")
		for _sf in wstore wstore-mount wstore-serve libwstore.so.0; do
			[ -e "$_sd/$_sf" ] && cp -L "$_sd/$_sf" "$SHARE/bin/$_sf"
		done
		chmod -R a+rX "$SHARE"
		WU="$SHARE/bin/wstore"
		if _so=$($AS_USER "$WU" --help 2>&1); then
			return 0
		fi
		SHARE_WHY="a copy of wstore in $SHARE does not run as uid 65534: $(printf %s "$_so" | head -1)"
		rm -rf "$SHARE"
		SHARE=
		return 1
	done
	SHARE_WHY="no directory uid 65534 can reach ($T, /tmp, /var/tmp)"
	return 1
}

# ---- the file store's layouts --------------------------------------------
# chunk_at STORE KEY: "PATH OFFSET" of chunk KEY of the file store at STORE:
# its range of the checkpoint file's data file (<ph>/data-<cs>, offset
# i * cs) or, in a store of the old layout, its own chunk file (offset 0)
chunk_at() {
	_ca_d=${2%/chunks/*}
	_ca_f=$(ls "$1/$_ca_d" 2>/dev/null | grep '^data-' | head -1)
	if [ -n "$_ca_f" ]; then
		echo "$1/$_ca_d/$_ca_f $(($(expr "${2##*/chunks/}" + 0) * ${_ca_f#data-}))"
	else
		echo "$1/$2 0"
	fi
}
# chunk_remove STORE KEY: make chunk KEY missing (and those after it in a
# data file, which is cut where the chunk starts)
chunk_remove() {
	set -- $(chunk_at "$1" "$2")
	if [ "$2" = 0 ]; then rm -f "$1"; else truncate -s "$2" "$1"; fi
}
