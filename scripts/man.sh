#!/bin/sh
# man.sh - one man page from one docs/cli page, at build time (meson.build):
#   sh scripts/man.sh TOOL IN.md OUT.1 VERSION
# TOOL is lowdown or pandoc (both from Debian).  The page's first line
# ("# wstore-df(1)") becomes the title; its "## NAME", "## SYNOPSIS", ...
# become the man page's sections; links keep their text only (their
# targets are other pages of docs/, not files a reader of man has).  The
# page is set left-aligned without hyphenation (below).
set -eu
tool=$1 in=$2 out=$3 version=$4
name=$(basename "$in" .md)
tmp="$out.tmp"
sed -e '1{/^# /d;}' -e 's/^## /# /' \
	-e 's/\[\([^]]*\)\]([^)]*)/\1/g' "$in" > "$tmp.md"
case $(basename "$tool") in
lowdown*)
	"$tool" -s -Tman -M "title=$name" -M section=1 \
		-M "source=wstore $version" -o "$tmp" "$tmp.md" ;;
pandoc*)
	"$tool" -s -f markdown -t man -M "title=$name" -M section=1 \
		-M "footer=wstore $version" -o "$tmp" "$tmp.md" ;;
*)
	echo "man.sh: unknown tool '$tool'" >&2
	exit 1 ;;
esac
rm -f "$tmp.md"
# left-aligned, not justified, and no hyphenation: long words (paths,
# option names, URLs) then never make troff warn "cannot adjust line" or
# break an option name at a narrow terminal
# break points (\:, zero width) after every '/' of the text, and after
# '_', ',', '=', '.', ':' and '-' inside table cells: long paths, URLs and
# option names in narrow columns would otherwise "can't break line"
sed -i -e '/^\.TH /a\
.ad l\
.nh' -e '/^T{$/,/^\.TE/{/^T[{}]/!{/^\./!s/\([_,=.:-]\)/\1\\:/g;};}' \
	-e '/^\./!s|/|/\\:|g' "$tmp"
mv "$tmp" "$out"
