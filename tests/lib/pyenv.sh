# pyenv.sh - what a Python process needs to load a libwstore.so of a test
# build: pyenv_for LIB exports WSTORE_LIBRARY, and for a sanitizer build
# (make asan) puts its runtime first in LD_PRELOAD (the interpreter is not
# built with it) and turns leak checks off (the interpreter is not
# leak-clean; the library is checked by the C suites).
pyenv_for() { # LIB
	export WSTORE_LIBRARY="$1"
	_asan=$(ldd "$1" 2>/dev/null | awk '/libasan/ { print $3 }')
	if [ -n "$_asan" ]; then
		export LD_PRELOAD="$_asan${LD_PRELOAD:+:$LD_PRELOAD}"
		export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
	fi
}
