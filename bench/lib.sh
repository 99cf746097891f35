# bench/lib.sh - shared by bench/redis.sh and bench/mooncake.sh; source it.
#
#   bench_pull_dest SIZE DEFAULT   the directory pulls write under, in
#                                  $DEST: DEFAULT when set, else a fresh
#                                  one in /dev/shm when it has room for
#                                  twice SIZE bytes (so the figure is the
#                                  store's and not the disk's: pull fsyncs
#                                  every file), else $T
#   bench_pull_dest_cleanup        remove $DEST if bench_pull_dest made it

bench_pull_dest() {
	DEST=$2
	[ -n "$DEST" ] && return 0
	DEST=$T
	_shm=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')
	if [ -w /dev/shm ] && [ "${_shm:-0}" -gt $(($1 / 1024 * 2)) ]; then
		DEST=$(mktemp -d /dev/shm/wstore-bench-pull-XXXXXX)
	fi
}

bench_pull_dest_cleanup() {
	case $DEST in /dev/shm/wstore-bench-pull-*) rm -rf "$DEST" ;; esac
}
