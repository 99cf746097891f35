# merge.awk - a partial run of bench/fleet/run.sh (FLEET_ONLY) merged into
# the results of earlier runs:
#   awk -f merge.awk PARTIAL RESULTS RESULTS   (the results read twice)
# Each name measured again replaces all its old lines, where the first of
# them stood; the new "rerun" line follows "bed" and any earlier rerun
# lines; names the results lacked go at the end.
FNR == 1 { file++ }
file == 1 {
	if ($1 != "rerun") seen[$1] = 1
	new[$1] = new[$1] $0 "\n"; order[++n] = $1; next
}
file == 2 { if ($1 == "bed" || $1 == "rerun") last = FNR; next }
$1 in seen { if (!done[$1]++) printf "%s", new[$1]; next }
{ print }
FNR == last { printf "%s", new["rerun"]; done["rerun"] = 1 }
END {
	for (i = 1; i <= n; i++)
		if (!(order[i] in done) && !shown[order[i]]++) printf "%s", new[order[i]]
}
