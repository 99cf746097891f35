#!/bin/sh
# deploy.sh - wstore as operators install and run it: man pages built from
# docs/cli (and the synopsis of wstore(1) naming every command), bash and
# zsh completion, the systemd units (systemd-analyze verify), readiness
# sent to systemd by the serve and mount daemons, a staged `make install`
# and `make uninstall`,
# `pip install ./python` into a venv offline finding libwstore by its
# soname, and the Debian packages: built (make deb, lintian without
# errors), installed with dpkg, used with no environment variables and as
# the units run them (the wstore user, after an operator's import as
# docs/deploy.md says), then purged.  Also: the version names the build,
# the installed library has no test backends, the units' hardening
# (systemd-analyze security --offline: no systemd needs to run).
#   WSTORE_TEST_DEBS=DIR   use the packages already built in DIR
#   WSTORE_TEST_NO_DPKG=1  skip the dpkg part (it installs into the system)
TAP_SUITE=deploy
. "$(dirname "$0")/../lib/suite.sh"
ROOT=$(cd "$HERE/.." && pwd)
B=$(cd "$BUILD" && pwd)
MNT="$T/mnt"
suite_cleanup() {
	[ -n "${serve_pid:-}" ] && kill "$serve_pid" 2>/dev/null
	[ -n "${UM:-}" ] && fusermount3 -u -z "$UM" 2>/dev/null
	[ -n "${fuse_mode:-}" ] && chmod "$fuse_mode" /dev/fuse
	fusermount3 -u -z "$MNT" 2>/dev/null
	command -v system_restore >/dev/null && system_restore
}
skip() { echo "# skip: $1"; }
SRC="$T/src"
python3 "$HERE/tools/mkckpt.py" "$SRC" --size 100000 --shards 1 >/dev/null
check_exit "a store to serve" 0 "$W" --quiet --store "$T/s" model import \
	--checkpoint-id c1 --model-id m/x --source "$SRC"

# ---- man pages ------------------------------------------------------------
if [ -f "$B/wstore.1" ]; then
	for md in "$ROOT"/docs/cli/*.md; do
		page=$(basename "$md" .md)
		check "man page $page.1 was built" test -s "$B/$page.1"
	done
	OUT=$(MANWIDTH=200 man -l "$B/wstore.1" 2>/dev/null)
	check_grep "wstore(1) renders, with a NAME section" "^NAME" "$OUT"
	syn=$(printf '%s\n' "$OUT" | sed -n '/^SYNOPSIS/,/^DESCRIPTION/p')
	# every command of `wstore --help` is in the synopsis
	for cmd in "model import" "model list" "model inspect" "model verify" \
		"model delete" "model materialize-file" "model pull" \
		"model pin" "model unpin" "df" "mount" "umount" "serve" "gc" \
		"admin gc" "admin unlock" "config init" "config show" \
		"config get" "config set" "config unset" "version"; do
		check_grep "wstore(1) synopsis lists '$cmd'" "wstore (\[global options\] )?$cmd( |$)" "$syn"
	done
	# no troff warning at the usual widths
	: > "$T/manwarn"
	for w in 60 80 120 200; do
		for page in "$B"/*.1; do
			MANWIDTH=$w man --warnings -l "$page" 2>&1 >/dev/null |
				sed "s|^|$w $(basename "$page"): |" >> "$T/manwarn"
		done
	done
	check "man: no troff warning at 60 to 200 columns ($(head -3 "$T/manwarn" | tr '\n' ' '))" \
		test ! -s "$T/manwarn"
	OUT=$(MANWIDTH=100 man -l "$B/wstore-config-set.1" 2>/dev/null)
	check_grep "a command page renders its options" "--system" "$OUT"
else
	skip "man pages not built (no lowdown or pandoc)"
fi

# ---- shell completion ---------------------------------------------------------
# complete LINE: what the bash completion offers for LINE (cursor at end)
complete_bash() {
	bash -c '. /usr/share/bash-completion/bash_completion; . "$1"
		line=$2; read -ra COMP_WORDS <<< "$line"
		[ "${line: -1}" = " " ] && COMP_WORDS+=("")
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMP_LINE=$line
		COMP_POINT=${#line}; _wstore; echo "${COMPREPLY[*]}"' \
		sh "$ROOT/dist/completion/wstore.bash" "$1"
}
if [ -f /usr/share/bash-completion/bash_completion ]; then
	check_grep "bash: 'wstore mod' completes to model" "^model$" "$(complete_bash "wstore mod")"
	check_grep "bash: config keys" "^store$" "$(complete_bash "wstore config get sto")"
	check_grep "bash: --system after a global option" "^--system$" \
		"$(complete_bash "wstore --store /x config set --sys")"
	check_grep "bash: checkpoint ids from the store" "^c1$" \
		"$(PATH="$B:$PATH" complete_bash "wstore --store $T/s model inspect c")"
	check_grep "bash: the aliases and resolve among model's commands" \
		"^import list ls resolve inspect verify delete rm materialize-file pull export copy pin unpin$" \
		"$(complete_bash "wstore model ")"
	check_grep "bash: model list --all" "^--all$" "$(complete_bash "wstore model ls --al")"
	check_grep "bash: model import --force" "^--force$" "$(complete_bash "wstore model import --fo")"
	check_grep "bash: mount --log-file" "^--log-file$" "$(complete_bash "wstore mount /m --log")"
	check_grep "bash: model resolve offers model ids" "^m/x$" \
		"$(PATH="$B:$PATH" complete_bash "wstore --store $T/s model resolve m")"
	check_grep "bash: model rm takes a second id" "^c1$" \
		"$(PATH="$B:$PATH" complete_bash "wstore --store $T/s model rm c1 c")"
	check_grep "bash: mount --checkpoint offers ids" "^c1$" \
		"$(PATH="$B:$PATH" complete_bash "wstore --store $T/s mount /m --checkpoint c")"
	# help_opts CMD...: the options CMD's --help defines (its usage lines
	# up to the first blank one, and the lines that start with an option)
	help_opts() {
		"$W" "$@" --help 2>&1 | awk 'NR == 1, /^$/ { print; next } /^ +-/' |
			grep -o -- '--[a-z][a-z-]*' | sort -u | grep -vx -- '--help'
	}
	# the completion against --help and the key list: every command of
	# `wstore --help`, every option of its --help, every global option
	# and every config key is offered (a new command, flag or key that
	# the completion lacks fails here)
	cmds=$("$W" --help | sed -n '/^commands:/,/^$/p' | grep '^  [a-z]' |
		sed 's/ | /\n  /g' | sed 's/^  //' | awk '{ c = ""; for (i = 1; i <= NF; i++) {
			if ($i !~ /^[a-z][a-z-]*$/) break; c = c (c ? " " : "") $i } print c }')
	check "wstore --help lists commands ($(printf '%s\n' "$cmds" | wc -l))" \
		test "$(printf '%s\n' "$cmds" | wc -l)" -ge 20
	missing=
	for c in $(printf '%s\n' "$cmds" | awk '{ print $1 }' | sort -u); do
		printf '%s\n' "$(complete_bash "wstore ")" | tr ' ' '\n' | grep -qx "$c" ||
			missing="$missing '$c'"
	done
	printf '%s\n' "$cmds" | awk 'NF == 2' | while read -r g c; do
		printf '%s\n' "$(complete_bash "wstore $g ")" | tr ' ' '\n' | grep -qx "$c" ||
			echo "'$g $c'"
	done > "$T/missing-sub"
	check "bash: every command of --help is completed (missing:$missing $(cat "$T/missing-sub"))" \
		test -z "$missing" -a ! -s "$T/missing-sub"
	: > "$T/missing-opt"
	printf '%s\n' "$cmds" | while read -r c; do
		# shellcheck disable=SC2086
		opts=$(help_opts $c)
		have=$(complete_bash "wstore $c --" | tr ' ' '\n')
		for o in $opts; do
			printf '%s\n' "$have" | grep -qx -- "$o" || echo "$c $o" >> "$T/missing-opt"
		done
	done
	check "bash: every option of each command's --help ($(tr '\n' ',' < "$T/missing-opt"))" \
		test ! -s "$T/missing-opt"
	gopts=$("$W" --help | sed -n '/^global options/,/^$/p' | grep -o -- '--[a-z][a-z-]*' | sort -u)
	have=$(complete_bash "wstore --" | tr ' ' '\n')
	missing=
	for o in $gopts; do
		printf '%s\n' "$have" | grep -qx -- "$o" || missing="$missing $o"
	done
	check "bash: every global option of --help ($missing)" test -z "$missing"
	"$W" config get nosuchkey > /dev/null 2> "$T/keys.err"
	keys=$(sed -n 's/.*the keys: //p' "$T/keys.err" | tr -d ',' | tr ' ' '\n' | grep . | sort)
	check "the key list from config get ($(printf '%s\n' "$keys" | wc -l))" \
		test "$(printf '%s\n' "$keys" | wc -l)" -ge 20
	bkeys=$(complete_bash "wstore config set " | tr ' ' '\n' | grep . | sort)
	check "bash: config keys are the library's ($(printf '%s\n' "$keys" "$bkeys" | sort | uniq -u | tr '\n' ' '))" \
		test "$keys" = "$bkeys"
	zkeys=$(sed -n '/^_wstore_keys/,/^}/p' "$ROOT/dist/completion/_wstore" |
		tr -s ' ()\n' '\n' | grep -E '^[a-z][a-z0-9_]+$' | grep -v '^local$\|^keys$\|^compadd$\|^a$' | sort -u)
	check "zsh: config keys are the library's ($(printf '%s\n' "$keys" "$zkeys" | sort | uniq -u | tr '\n' ' '))" \
		test "$keys" = "$zkeys"
	missing=
	for o in $gopts; do
		grep -q -- "$o" "$ROOT/dist/completion/_wstore" || missing="$missing $o"
	done
	check "zsh: every global option ($missing)" test -z "$missing"
	# the man pages (docs/cli) name every key and every option
	missing=
	for k in $keys; do
		grep -q "\b$k\b" "$ROOT/docs/cli/wstore.md" || missing="$missing $k"
	done
	check "wstore(1) names every config key ($missing)" test -z "$missing"
	: > "$T/missing-man"
	printf '%s\n' "$cmds" | while read -r c; do
		page="$ROOT/docs/cli/wstore-$(printf %s "$c" | tr ' ' '-').md"
		[ "$c" = "gc" ] && page="$ROOT/docs/cli/wstore-admin-gc.md"
		[ "$c" = "model unpin" ] && page="$ROOT/docs/cli/wstore-model-pin.md"
		[ "$c" = "umount" ] && page="$ROOT/docs/cli/wstore-mount.md"
		[ "$c" = "version" ] && continue
		[ -f "$page" ] || { echo "$c: no page" >> "$T/missing-man"; continue; }
		# shellcheck disable=SC2086
		for o in $(help_opts $c); do
			grep -q -- "$o" "$page" || echo "$c $o" >> "$T/missing-man"
		done
	done
	check "each command's page names its options ($(tr '\n' ',' < "$T/missing-man"))" \
		test ! -s "$T/missing-man"
else
	tap_not_ok "bash-completion is not installed (scripts/deps.sh test)"
fi
if command -v zsh >/dev/null; then
	check "zsh: the completion parses" zsh -n "$ROOT/dist/completion/_wstore"
else
	tap_not_ok "zsh is not installed (scripts/deps.sh test)"
fi

# ---- systemd units ----------------------------------------------------------
if command -v systemd-analyze >/dev/null; then
	mkdir "$T/units"
	for u in wstore-serve.service wstore-mount@.service wstore-gc.service; do
		# the tree's binary in place of the installed one
		sed "s|^ExecStart=[^ ]*/wstore |ExecStart=$B/wstore |" "$B/$u" \
			> "$T/units/$u"
	done
	cp "$ROOT/dist/systemd/wstore-gc.timer" "$T/units/"
	check_exit "systemd-analyze verify: the units of the tree" 0 \
		sh -c "cd '$T/units' && systemd-analyze verify --man=no \
		./wstore-serve.service ./wstore-gc.service ./wstore-gc.timer \
		./wstore-mount@mnt-wstore.service"
	check "... with nothing to say" test -z "$OUT"
	printf '[Service]\nExecStart=/nonexistent/wstore serve\nBogus=1\n' \
		> "$T/units/bad.service"
	check_exit "systemd-analyze verify fails on a bad unit (the check can fail)" 1 \
		sh -c "cd '$T/units' && systemd-analyze verify --man=no ./bad.service"
	# the hardening, scored from the unit files (--offline: no running
	# systemd is asked); serve and gc at most 2.0, the mount (which
	# cannot have a mount namespace of its own) at most 4.0
	cp "$T/units/wstore-mount@.service" "$T/units/wstore-mount@mnt-wstore.service"
	for u in wstore-serve.service:2.0 wstore-gc.service:2.0 \
		wstore-mount@mnt-wstore.service:4.0; do
		check_exit "systemd-analyze security --offline ${u%:*}" 0 sh -c \
			"cd '$T/units' && systemd-analyze security --offline=true --no-pager ./${u%:*}"
		score=$(printf '%s\n' "$OUT" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
		check "... scores ${score:-?}, at most ${u#*:}" \
			awk -v s="${score:-99}" -v m="${u#*:}" 'BEGIN { exit !(s <= m) }'
	done
	printf '[Service]\nExecStart=/bin/true\n' > "$T/units/plain.service"
	check_exit "... an unhardened unit scores above them (the check can fail)" 0 sh -c \
		"cd '$T/units' && systemd-analyze security --offline=true --no-pager ./plain.service"
	score=$(printf '%s\n' "$OUT" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
	check "... ($score)" awk -v s="${score:-0}" 'BEGIN { exit !(s > 4.0) }'
	for u in wstore-serve.service wstore-gc.service wstore-mount@.service; do
		check_grep "$u: secrets by LoadCredential=, never Environment=" \
			"LoadCredential=" "$(cat "$T/units/$u")"
		check "... and no secret in Environment=" sh -c \
			"! grep -Ei '^Environment=.*(TOKEN|PASSWORD)' '$T/units/$u'"
	done
else
	tap_not_ok "systemd-analyze is not installed (scripts/deps.sh deploy)"
fi

# ---- readiness (sd_notify) ----------------------------------------------------
# notify_listen SOCK OUTFILE SECONDS: collect datagrams sent to SOCK into
# OUTFILE for at most SECONDS (background; killed once its case is done,
# SECONDS only bounds a listener left behind); READY=1 is what a
# Type=notify unit waits for
notify_listen() {
	python3 - "$1" "$2" "$3" <<'EOF' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
end = time.monotonic() + float(sys.argv[3])
with open(sys.argv[2], "a") as out:
    while time.monotonic() < end:
        s.settimeout(max(0.05, end - time.monotonic()))
        try:
            out.write(s.recv(4096).decode() + "\n")
            out.flush()
        except socket.timeout:
            pass
EOF
	listen_pid=$!
	wait_for 10 test -S "$1"
}
if [ -x "$B/wstore-serve" ]; then
	notify_listen "$T/serve.sock" "$T/serve.notify" 600
	NOTIFY_SOCKET="$T/serve.sock" "$W" --store "$T/s" serve \
		--listen 127.0.0.1:0 > "$T/serve.log" 2>&1 &
	serve_pid=$!
	check "serve tells systemd READY=1 once listening" \
		wait_for 30 grep -qx READY=1 "$T/serve.notify"
	check_grep "... after it printed where it listens" "listening on" "$(cat "$T/serve.log")"
	kill -TERM "$serve_pid"
	wait_exit 30 "$serve_pid"; rc=$?
	serve_pid=
	check "serve stops on SIGTERM, exit 0 ($rc)" test "$rc" = 0
	check "... telling systemd STOPPING=1" grep -qx STOPPING=1 "$T/serve.notify"
	kill "$listen_pid" 2>/dev/null; wait "$listen_pid" 2>/dev/null
	"$W" --store "$T/s" serve --listen 127.0.0.1:0 > "$T/serve2.log" 2>&1 &
	serve_pid=$!
	check "without NOTIFY_SOCKET, serve starts as before" \
		wait_for 30 grep -q "listening on" "$T/serve2.log"
	kill -TERM "$serve_pid"
	wait_exit 30 "$serve_pid"; rc=$?
	serve_pid=
	check "... and stops on SIGTERM, exit 0 ($rc)" test "$rc" = 0
else
	skip "serve not built"
fi
if [ -x "$B/wstore-mount" ] && [ -e /dev/fuse ]; then
	mkdir -p "$MNT"
	notify_listen "$T/mount.sock" "$T/mount.notify" 600
	NOTIFY_SOCKET="$T/mount.sock" "$W" --store "$T/s" mount --foreground \
		"$MNT" > "$T/mount.log" 2>&1 &
	mount_pid=$!
	check "mount tells systemd READY=1 once mounted" \
		wait_for 30 grep -qx READY=1 "$T/mount.notify"
	check "... and the mount is there by then" test -d "$MNT/c1"
	"$W" umount "$MNT" >/dev/null 2>&1
	wait_exit 30 "$mount_pid"; rc=$?
	check "mount --foreground ends on umount, exit 0 ($rc)" test "$rc" = 0
	kill "$listen_pid" 2>/dev/null; wait "$listen_pid" 2>/dev/null
else
	skip "mount not built or no /dev/fuse"
fi

# ---- make install / make uninstall (staged) ----------------------------------
D="$T/destdir"
check_exit "meson install into DESTDIR" 0 meson install -C "$B" --destdir "$D" --quiet
P=$(sed -n "s/^prefix=//p" "$B/meson-private/wstore.pc" 2>/dev/null)
P=${P:-/usr/local}
for f in bin/wstore share/man/man1/wstore.1 share/man/man1/wstore-mount.1 \
	share/bash-completion/completions/wstore lib/systemd/system/wstore-serve.service \
	lib/systemd/system/wstore-mount@.service lib/systemd/system/wstore-gc.timer \
	lib/sysusers.d/wstore.conf lib/tmpfiles.d/wstore.conf include/wstore/wstore.h; do
	check "installs $P/$f" test -f "$D$P/$f"
done
check "installs the zsh completion" sh -c "ls '$D$P'/share/zsh/*/_wstore"
check_grep "the installed unit runs the installed wstore" \
	"^ExecStart=$P/bin/wstore serve$" "$(cat "$D$P/lib/systemd/system/wstore-serve.service")"
pydir=$(sed -n 's|/__init__.py$||p' "$B/meson-logs/install-log.txt" | head -1)
mkdir -p "$pydir/__pycache__" && touch "$pydir/__pycache__/__init__.cpython-311.pyc"
check_exit "make uninstall removes them" 0 env DESTDIR="$D" make -s -C "$ROOT" BUILD="$B" uninstall
left=$(find "$D" -type f 2>/dev/null | head -5)
check "... every file, and what Python wrote beside them ($left)" test -z "$left"
meson install -C "$B" --destdir "$D" --quiet >/dev/null 2>&1
touch "$D$P/share/man/man1/not-ours.1"
chmod 555 "$D$P/include/wstore"
check_exit "make uninstall fails when it cannot remove something (make: 2)" 2 \
	env DESTDIR="$D" make -s -C "$ROOT" BUILD="$B" uninstall
check_grep "... saying so" "could not be removed" "$OUT"
chmod 755 "$D$P/include/wstore"

# ---- the version names the build ------------------------------------------
rel=$(sed -n "s/^  version : '\(.*\)',$/\1/p" "$ROOT/meson.build")
v_here=$(sh "$ROOT/scripts/version.sh" "$rel" "$ROOT")
check_exit "wstore --version" 0 "$W" --version
# the build's: the release, commits and commit (the tree may have moved
# on since the build: a commit of it)
check_grep "... is the build's: release, commits and commit" \
	"^wstore $(printf %s "$rel" | sed 's/[.]/\\./g')\+[0-9]+\.g[0-9a-f]{12}(\.dirty)?$" "$OUT"
sha=$(printf '%s\n' "$OUT" | sed -n 's/.*\.g\([0-9a-f]\{12\}\).*/\1/p')
check "... naming a commit of this tree (${sha:-none})" \
	git -C "$ROOT" cat-file -e "${sha:-none}^{commit}"
if git -C "$ROOT" rev-parse -q --verify HEAD~1 >/dev/null 2>&1; then
	git clone -q --no-checkout "$ROOT" "$T/prev" 2>/dev/null &&
		git -C "$T/prev" checkout -q HEAD~1 2>/dev/null
	v_prev=$(sh "$ROOT/scripts/version.sh" "$rel" "$T/prev")
	check "... and differs between two commits ($v_prev, $v_here)" \
		test -n "$v_prev" -a "${v_prev%.dirty}" != "${v_here%.dirty}"
	check "... the later sorting later (dpkg)" \
		dpkg --compare-versions "$v_here" gt "$v_prev"
else
	tap_skip "the version differs between two commits" "not a git tree with two commits"
	tap_skip "the later version sorts later" "not a git tree with two commits"
fi

# ---- the installed library has no test backend -------------------------------
PROD="$B/src/lib/libwstore.so"
check "the installed library is built apart ($PROD)" test -f "$PROD"
check_exit "nm: its symbols" 0 nm "$PROD"
check "... no fault-injecting backend" sh -c "! printf '%s\n' \"\$1\" | grep -q 'kind_fault\|fault_new\|fault_calls'" sh "$OUT"
check "... no in-memory backend (a stub of wstore_backend_mem_new)" sh -c "! printf '%s\n' \"\$1\" | grep -q 'kind_mem\|mem_get\|mem_put'" sh "$OUT"
check_exit "nm: the tests' library has them (the check can fail)" 0 nm "$B/libwstore.so"
check_grep "... the fault backend" "kind_fault" "$OUT"
check_exit "the installed library: fault+ is an unknown store" 1 \
	env LD_LIBRARY_PATH="$B/src/lib" WSTORE_FAULTS=crash=1 "$W" --store "fault+$T/s" model list
check_grep "... saying so (no crash)" "unknown store URL 'fault+|file store 'fault+.*' does not exist" "$OUT"
check_exit "... and mem:// too" 1 env LD_LIBRARY_PATH="$B/src/lib" "$W" --store mem:// model list
check_grep "... saying so" "unknown store URL 'mem://'" "$OUT"

# ---- pip install ./python, offline, finding libwstore by its soname ---------
if /usr/bin/python3 -c 'import ensurepip' 2>/dev/null &&
	ls /usr/share/python-wheels/wheel-*.whl >/dev/null 2>&1; then
	/usr/bin/python3 -m venv "$T/venv" >/dev/null 2>&1
	# a copy: setuptools writes wstore.egg-info beside the sources
	cp -r "$ROOT/python" "$T/python"
	check_exit "pip install ./python into a venv, offline" 0 \
		"$T/venv/bin/pip" install --no-index --find-links /usr/share/python-wheels \
		"$T/python"
	cd "$T"
	check_exit "... imports, finding libwstore.so.0 through the loader" 0 \
		env -u WSTORE_LIBRARY LD_LIBRARY_PATH="$B" "$T/venv/bin/python" -c \
		'import wstore, wstore._native as n; print(n.library_path); print(wstore.Store("'"$T/s"'").list())'
	check_grep "... by its soname" "^libwstore.so.0$" "$OUT"
	check_grep "... and reads the store" "c1" "$OUT"
	check_exit "... without the library, says how to fix it" 1 \
		env -u WSTORE_LIBRARY "$T/venv/bin/python" -c 'import wstore'
	check_grep "... naming the soname" "cannot load libwstore.so.*libwstore.so.0" "$OUT"
	cd "$ROOT"
else
	tap_not_ok "python3-venv or python3-wheel-whl missing (scripts/deps.sh deploy)"
fi

# ---- the Debian packages ----------------------------------------------------
debs_installed() { dpkg-query -W -f='${Status}\n' wstore libwstore0 2>/dev/null | grep -q "ok installed"; }
# dpkg_wait ARGS...: dpkg ARGS, tried again while another process (an
# apt-get of someone else) holds dpkg's lock, for at most 120 s
dpkg_wait() {
	_dw=0
	while :; do
		_out=$(dpkg "$@" 2>&1); _rc=$?
		case $_out in
		*"lock was locked by another process"*) ;;
		*) printf '%s\n' "$_out"; return $_rc ;;
		esac
		if [ $_dw -ge 1200 ]; then printf '%s\n' "$_out"; return $_rc; fi
		sleep 0.1; _dw=$((_dw + 1))
	done
}

# What installing the packages creates on the machine and a purge leaves
# (the wstore system user and group, as Debian keeps system users; the
# system store if it is not empty): noted before the install, and removed
# again by system_restore, only what this suite created (also from the
# EXIT trap, for a run that stopped half way, while fd 9 still holds the
# lock below).
pkgs_in= had_user= had_group= had_store=
system_note() {
	getent passwd wstore >/dev/null && had_user=1
	getent group wstore >/dev/null && had_group=1
	[ -e /var/lib/wstore ] && had_store=1
	pkgs_in=1
}
system_restore() {
	[ -n "$pkgs_in" ] || return 0
	pkgs_in=
	debs_installed && dpkg_wait --purge python3-wstore libwstore-dev \
		wstore libwstore0 >/dev/null
	[ -z "$had_store" ] && [ -d /var/lib/wstore ] && rm -rf /var/lib/wstore
	[ -z "$had_user" ] && getent passwd wstore >/dev/null && userdel wstore
	[ -z "$had_group" ] && getent group wstore >/dev/null && groupdel wstore
	return 0
}

# The packages built, installed into the system, used and purged (one
# deploy suite at a time on a machine: the lock below).
dpkg_part() {
	for p in wstore libwstore0 libwstore-dev python3-wstore wstore-dbgsym libwstore0-dbgsym; do
		check "package $p was built" sh -c "ls '$DEBS'/${p}_*.deb"
	done
	check_exit "dpkg -i installs them" 0 dpkg_wait -i "$DEBS"/wstore_*.deb \
		"$DEBS"/libwstore0_*.deb "$DEBS"/libwstore-dev_*.deb \
		"$DEBS"/python3-wstore_*.deb
	cd /
	E="env -i"
	check_exit "/usr/bin/wstore runs with no environment" 0 $E /usr/bin/wstore --version
	check_grep "... its version" "^wstore [0-9]" "$OUT"
	check "... without a RUNPATH" sh -c "! readelf -d /usr/bin/wstore | grep -q RUNPATH"
	check_exit "... reads a store" 0 $E /usr/bin/wstore --store "$T/s" model list
	check_grep "... listing its checkpoint" "^c1 " "$OUT"
	check_exit "pkg-config --libs wstore" 0 $E /usr/bin/pkg-config --libs wstore
	check_grep "... gives -lwstore" "-lwstore" "$OUT"
	check_exit "/usr/bin/python3 -c 'import wstore' finds the packaged library" 0 \
		$E /usr/bin/python3 -c 'import wstore, wstore._native as n; print(wstore.__file__, n.library_path)'
	check_grep "... the packaged module and library" "^/usr/lib/python3/dist-packages/wstore/__init__.py libwstore.so.0$" "$OUT"
	check_exit "... and reads a store with it" 0 $E /usr/bin/python3 -c \
		'import wstore; print(wstore.Store("'"$T/s"'").list())'
	check_exit "man wstore finds the page" 0 $E /usr/bin/man -w wstore
	check_grep "... in /usr/share/man" "^/usr/share/man/man1/wstore.1.gz$" "$OUT"
	check_exit "man wstore renders" 0 $E PATH=/usr/bin:/bin MANWIDTH=80 /usr/bin/man wstore
	check_grep "... with its synopsis" "wstore \[global options\] serve" "$OUT"
	check "man wstore-config-set" $E /usr/bin/man -w wstore-config-set
	check "the bash completion is installed" test -f /usr/share/bash-completion/completions/wstore
	check_exit "the bash completion completes commands" 0 bash -c \
		'. /usr/share/bash-completion/bash_completion; . /usr/share/bash-completion/completions/wstore;
		 COMP_WORDS=(wstore con); COMP_CWORD=1; COMP_LINE="wstore con"; COMP_POINT=10; _wstore; echo "${COMPREPLY[*]}"'
	check_grep "... 'con' to 'config'" "^config$" "$OUT"
	check "the zsh completion is installed" test -f /usr/share/zsh/vendor-completions/_wstore
	check_exit "the wstore system user exists" 0 getent passwd wstore
	check_grep "... with no login shell" "nologin" "$OUT"
	check_exit "/var/lib/wstore exists, owned by wstore" 0 stat -c '%U %a' /var/lib/wstore
	check_grep "... mode 755" "^wstore 755$" "$OUT"
	check_exit "the version of the package" 0 dpkg-query -W -f '${Version}' wstore
	pkgver=$OUT
	check_exit "... is the version wstore prints" 0 $E /usr/bin/wstore --version
	check_grep "... ($pkgver)" "^wstore $(printf %s "$pkgver" | sed 's/[.+]/\\&/g')$" "$OUT"
	check_grep "... which names a commit" "\+[0-9]+\.g[0-9a-f]{12}" "$pkgver"
	# the control scripts: debhelper's systemd lines (units where
	# debhelper 13.11 finds them)
	mkdir -p "$T/ctl"
	dpkg-deb -e "$DEBS"/wstore_*.deb "$T/ctl"
	check_grep "postinst reloads systemd" "daemon-reload" "$(cat "$T/ctl/postinst")"
	check_grep "... and starts enabled units (deb-systemd-invoke)" "deb-systemd-invoke" "$(cat "$T/ctl/postinst")"
	check_grep "prerm stops the units on removal" "deb-systemd-invoke stop" "$(cat "$T/ctl/prerm" 2>/dev/null)"
	check_grep "postrm reloads systemd on removal" "daemon-reload" "$(cat "$T/ctl/postrm")"
	check_grep "postrm cleans up on purge" "deb-systemd-helper purge" "$(cat "$T/ctl/postrm")"
	check_grep "... naming the serve unit" "wstore-serve.service" "$(cat "$T/ctl/postrm")"
	check "the units are in /lib/systemd/system" test -f /lib/systemd/system/wstore-serve.service
	# the system configuration: a conffile naming the system store
	check_grep "/etc/wstore/config.json is a conffile" "^/etc/wstore/config.json$" "$(cat "$T/ctl/conffiles")"
	check_exit "/etc/wstore: mode" 0 stat -c '%U %a' /etc/wstore /etc/wstore/config.json
	check_grep "... 755 and 644, root's" "^root 755 root 644$" "$(printf '%s\n' "$OUT" | tr '\n' ' ' | sed 's/ $//')"
	check_exit "... readable by wstore" 0 runuser -u wstore -- cat /etc/wstore/config.json
	check_exit "config set --system keeps it so" 0 $E /usr/bin/wstore config set --system quota 100GiB
	check_exit "... still readable by wstore" 0 runuser -u wstore -- env -i /usr/bin/wstore config get quota
	check_grep "... with the new value" "^100GiB$" "$OUT"
	check_exit "a bad value at set is refused" 1 $E /usr/bin/wstore config set --system serve_listen 0.0.0.0
	check_grep "... in one line naming file and key" "^wstore: config '/etc/wstore/config.json': key 'serve_listen'" "$OUT"
	check_exit "every user's store is the system store (the conffile)" 0 \
		runuser -u wstore -- env -i /usr/bin/wstore config get store
	check_grep "... /var/lib/wstore" "^/var/lib/wstore$" "$OUT"
	check_exit "... root's too" 0 $E HOME=/root /usr/bin/wstore config get store
	check_grep "... /var/lib/wstore" "^/var/lib/wstore$" "$OUT"
	if command -v systemd-analyze >/dev/null; then
		check_exit "systemd-analyze verify: the installed units (man pages too)" 0 \
			systemd-analyze verify /lib/systemd/system/wstore-serve.service \
			/lib/systemd/system/wstore-gc.service \
			/lib/systemd/system/wstore-gc.timer
		check "... with nothing to say" test -z "$OUT"
		for u in wstore-serve.service wstore-gc.service; do
			check_exit "systemd-analyze security --offline: installed $u" 0 \
				systemd-analyze security --offline=true --no-pager /lib/systemd/system/$u
			score=$(printf '%s\n' "$OUT" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
			check "... at most 2.0 (${score:-?})" awk -v s="${score:-99}" 'BEGIN { exit !(s <= 2.0) }'
		done
	fi
	# an operator imports as docs/deploy.md says: as the wstore user
	SRCW=$(mktemp -d /tmp/wstore-deploy-src.XXXXXX)
	cp -r "$SRC/." "$SRCW/" && chmod -R a+rX "$SRCW"
	check_exit "root's import into the system store is refused" 1 \
		$E /usr/bin/wstore model import --checkpoint-id d0 --model-id m/d --source "$SRCW"
	check_grep "... saying as whom to run it" "belongs to user 'wstore': write to it as that user \(sudo -u wstore" "$OUT"
	check_exit "the operator's import: sudo -u wstore wstore model import" 0 \
		runuser -u wstore -- env -i /usr/bin/wstore --quiet model import \
		--checkpoint-id d1 --model-id m/d --source "$SRCW"
	# each unit's command, as the unit runs it: its user, no environment
	# but the unit's
	ue() { runuser -u wstore -- env -i XDG_DATA_HOME=/var/lib "$@"; }
	check_exit "wstore-gc.service's command as wstore" 0 ue /usr/bin/wstore --quiet gc
	check_exit "... and again, with the locks it left" 0 ue /usr/bin/wstore --quiet gc
	# as the unit runs it, in the background: the subshell execs setpriv,
	# which execs the rest, so $! is the server itself
	uw() { exec setpriv --reuid=wstore --regid=wstore --init-groups \
		env -i XDG_DATA_HOME=/var/lib "$@"; }
	uw /usr/bin/wstore serve --listen 127.0.0.1:0 > "$T/unit-serve.log" 2>&1 &
	serve_pid=$!
	if wait_for 30 grep -q "listening on" "$T/unit-serve.log"; then
		url=$(sed -n 's|.*listening on \(http://[^ ]*\).*|\1|p' "$T/unit-serve.log" | head -1)
		check_exit "wstore-serve.service's command as wstore: a download" 0 \
			curl -sSf -o "$T/dl.json" "$url/m/d/resolve/main/config.json"
		check "... the right bytes" cmp "$T/dl.json" "$SRCW/config.json"
		check_exit "... holding a lease meanwhile (df)" 0 $E /usr/bin/wstore --json df
		check_grep "... a live lease on d1" '"leases": [1-9]' "$OUT"
		check_exit "... so a plain delete refuses" 1 \
			runuser -u wstore -- env -i /usr/bin/wstore model delete d1
	else
		check "wstore-serve.service's command as wstore starts" false
	fi
	kill -TERM "$serve_pid" 2>/dev/null; wait_exit 60 "$serve_pid"; serve_pid=
	# a store root imported into (its lease files are root's): serve
	# refuses the download and says why, never serves it unleased
	mkdir -p "$T/rootstore-parent"; chmod 755 "$T/rootstore-parent"
	RS=$(mktemp -d /tmp/wstore-deploy-rs.XXXXXX); chmod 755 "$RS"
	$E /usr/bin/wstore --quiet --store "$RS" model import --checkpoint-id r1 \
		--model-id m/r --source "$SRCW" >/dev/null 2>&1
	chmod -R a+rX "$RS"
	uw /usr/bin/wstore --store "$RS" serve --listen 127.0.0.1:0 > "$T/unit-serve2.log" 2>&1 &
	serve_pid=$!
	if wait_for 30 grep -q "listening on" "$T/unit-serve2.log"; then
		url=$(sed -n 's|.*listening on \(http://[^ ]*\).*|\1|p' "$T/unit-serve2.log" | head -1)
		code=$(curl -s -o /dev/null -w '%{http_code}' "$url/m/r/resolve/main/config.json")
		check "serve as wstore on root's store: the download fails ($code)" \
			test "$code" -ge 500 -a "$code" -le 599
		check "... and serve logs why" grep -q "refusing to serve 'r1' without a read lease" "$T/unit-serve2.log"
	else
		check "serve as wstore on root's store starts" false
	fi
	kill -TERM "$serve_pid" 2>/dev/null; wait_exit 60 "$serve_pid"; serve_pid=
	if [ -c /dev/fuse ] && [ -x /usr/libexec/wstore/wstore-mount ]; then
		UM=$(mktemp -d /tmp/wstore-deploy-mnt.XXXXXX); chmod 755 "$UM"
		# Debian makes /dev/fuse 0666 (udev); a container may have it
		# 0600: made so for this case, and put back
		fuse_mode=$(stat -c %a /dev/fuse)
		chmod 666 /dev/fuse
		# the mount unit: wstore with CAP_SYS_ADMIN alone
		setpriv --reuid=wstore --regid=wstore --init-groups \
			--inh-caps=+sys_admin --ambient-caps=+sys_admin \
			--bounding-set=-all,+sys_admin \
			env -i XDG_DATA_HOME=/var/lib /usr/bin/wstore mount --foreground \
			--allow-other "$UM" > "$T/unit-mount.log" 2>&1 &
		mount_pid=$!
		check "wstore-mount@.service's command as wstore: mounted" \
			wait_for 30 test -f "$UM/d1/config.json"
		check "... a file reads back, by root (--allow-other)" cmp "$UM/d1/config.json" "$SRCW/config.json"
		umount "$UM" 2>/dev/null || fusermount3 -u -z "$UM" 2>/dev/null
		wait_exit 30 "$mount_pid"
		# root's store: the mount as wstore cannot lease, so it does not
		# read (EIO), and logs why
		setpriv --reuid=wstore --regid=wstore --init-groups \
			--inh-caps=+sys_admin --ambient-caps=+sys_admin \
			--bounding-set=-all,+sys_admin \
			env -i /usr/bin/wstore --store "$RS" mount --foreground \
			--allow-other "$UM" > "$T/unit-mount2.log" 2>&1 &
		mount_pid=$!
		if wait_for 30 test -d "$UM/r1"; then
			check "the mount as wstore of root's store: a file does not read" \
				sh -c "! cat '$UM/r1/config.json' >/dev/null 2>&1"
			check "... and the mount logs why" grep -q \
				"refusing to serve 'r1' without a read lease" "$T/unit-mount2.log"
		else
			check "the mount as wstore of root's store mounts" false
		fi
		umount "$UM" 2>/dev/null || fusermount3 -u -z "$UM" 2>/dev/null
		wait_exit 30 "$mount_pid"
		chmod "$fuse_mode" /dev/fuse; fuse_mode=
		rmdir "$UM" 2>/dev/null; UM=
	else
		tap_skip "wstore-mount@.service's command as wstore" "no /dev/fuse or no mount daemon"
		tap_skip "... a file reads back" "no /dev/fuse or no mount daemon"
	fi
	rm -rf "$RS"
	check_exit "the operator deletes as wstore" 0 \
		runuser -u wstore -- env -i /usr/bin/wstore model delete d1
	check_exit "... and gc as wstore" 0 ue /usr/bin/wstore --quiet gc
	rm -rf "$SRCW"
	check_exit "dpkg --purge removes them" 0 dpkg_wait --purge python3-wstore \
		libwstore-dev wstore libwstore0
	check "... /usr/bin/wstore is gone" test ! -e /usr/bin/wstore
	check "... the library is gone" sh -c "! ls /usr/lib/*/libwstore.so* 2>/dev/null"
	check "... the python module is gone" test ! -e /usr/lib/python3/dist-packages/wstore
	check "... the units are gone" sh -c "! ls /lib/systemd/system/wstore* 2>/dev/null"
	check "... /etc/wstore is gone, its conffile too" test ! -e /etc/wstore
	# what Debian's policy keeps: the system store once it held
	# checkpoints (user data), and the wstore user (docs/deploy.md)
	check_grep "... the system store that was used is kept, said so" \
		"/var/lib/wstore is not empty: kept" "$OUT"
	check "... as a directory" test -d /var/lib/wstore
	check "... and the wstore user" getent passwd wstore
	cd "$ROOT"
}

if [ "${WSTORE_TEST_NO_DPKG:-}" = 1 ]; then
	skip "dpkg part (WSTORE_TEST_NO_DPKG=1)"
elif [ "$(id -u)" != 0 ] || ! command -v dpkg-buildpackage >/dev/null; then
	tap_not_ok "the dpkg part needs root and dpkg-dev, debhelper (scripts/deps.sh deploy)"
else
	DEBS=${WSTORE_TEST_DEBS:+$(cd "$WSTORE_TEST_DEBS" && pwd)}
	if [ -z "$DEBS" ]; then
		DEBS="$T/debs"
		check_exit "make deb builds the packages (lintian: no errors)" 0 \
			sh "$ROOT/scripts/deb.sh" "$DEBS"
		printf '%s\n' "$OUT" | grep -E "^deb:|^  " | sed 's/^/# /'
	fi
	# another deploy suite (another tree's `make test`) installing the
	# same packages at the same time would pull them from under this one
	exec 9>/run/lock/wstore-deploy-suite.lock
	if ! flock -w 500 9; then
		tap_not_ok "another deploy suite held /run/lock/wstore-deploy-suite.lock for 500 s"
	elif debs_installed; then
		skip "wstore packages are installed on this machine already: not replaced"
	else
		system_note
		dpkg_part
		system_restore
		if [ -z "$had_user" ]; then
			check "the wstore user the install created is removed again" \
				sh -c '! getent passwd wstore && ! getent group wstore'
		else
			skip "the wstore user was there before: kept"
		fi
		check "... and /var/lib/wstore" test -n "$had_store" -o ! -e /var/lib/wstore
	fi
	exec 9>&-
fi

tap_done
