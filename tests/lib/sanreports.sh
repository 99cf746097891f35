#!/bin/sh
# sanreports.sh BUILD_DIR: print the sanitizer reports a run left in
# BUILD_DIR/sanitizer.<pid> (log_path of ASAN/UBSAN/TSAN_OPTIONS) and fail
# when there is one.  A report of a process whose exit status no check
# looked at (a daemon stopped by its suite) is still a finding.
set -u
n=0
for f in "$1"/sanitizer.*; do
	[ -s "$f" ] || continue
	n=$((n + 1))
	echo "== sanitizer report $f"
	cat "$f"
done
if [ "$n" -gt 0 ]; then
	echo "sanitizer reports: $n"
	exit 1
fi
echo "sanitizer reports: none"
