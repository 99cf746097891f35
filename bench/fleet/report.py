#!/usr/bin/python3
"""report.py - docs/fleet.md and its plots from the results of
bench/fleet/run.sh.

    report.py RESULTS DOCS_DIR

RESULTS has one line per scenario: a name, then KEY=VALUE words and free
text.  Writes DOCS_DIR/fleet/*.png (gnuplot, pngcairo or png terminal)
and DOCS_DIR/fleet.md: the page's fixed text (bench/fleet/fleet.md.in)
with the table of this run in place of @RESULTS@ and the plots in place
of @PLOTS@; each results-*.txt beside RESULTS (a run at another size,
bench/fleet/run.sh's FLEET_RESULTS) as a section of its own, with its
table and plot, in place of @SIZES@.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import time


def parse(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            name, _, rest = line.partition(" ")
            kv = dict(re.findall(r"(\w+)=([^\s;]+)", rest))
            rows.append((name, kv, rest))
    return rows


def first(rows, name, **match):
    for n, kv, rest in rows:
        if n == name and all(kv.get(k) == v for k, v in match.items()):
            return kv, rest
    return None, None


def gnuplot(script, out):
    """Run a gnuplot script; False when gnuplot is missing or fails."""
    gp = shutil.which("gnuplot")
    if not gp:
        return False
    term = "set terminal pngcairo size 1100,600\n"
    test = subprocess.run([gp, "-e", "set terminal pngcairo"],
                          capture_output=True, text=True)
    if test.returncode != 0 or test.stderr:
        term = "set terminal png size 1100,600\n"
    p = subprocess.run([gp], input=term + f"set output '{out}'\n" + script,
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(f"report.py: gnuplot: {p.stderr.strip()}", file=sys.stderr)
    return p.returncode == 0 and os.path.exists(out)


def bars(out, title, labels, values, rotate=-30):
    data = "\n".join(f'"{lab}" {val}' for lab, val in zip(labels, values))
    script = f"""set title "{title}"
set ylabel "MiB/s (aggregate)"
set style fill solid 0.6
set boxwidth 0.6
set yrange [0:*]
set grid ytics
set xtics noenhanced rotate by {rotate}
set bmargin 11
set rmargin 22
unset key
$d << EOD
{data}
EOD
plot $d using 0:2:xtic(1) with boxes, '' using 0:2:(sprintf("%.0f",$2)) with labels offset 0,0.7
"""
    return gnuplot(script, out)


def pull_bars(rows, n):
    """Labels and values of the pull and raw lines of rows."""
    labels, values = [], []
    for store in ("redis", "mooncake"):
        one, _ = first(rows, f"pull_{store}", nodes="1")
        many, _ = first(rows, f"pull_{store}", nodes=n)
        raw, _ = first(rows, f"raw_{store}")
        if one:
            labels.append(f"{store}: 1 pull")
            values.append(one["mibs"])
        if many:
            labels.append(f"{store}: {n} pulls")
            values.append(many["mibs"])
        if raw:
            labels.append(f"{store}: raw x{n}")
            values.append(raw["get_sum_mibs"])
    return labels, values


def floor_table(rows):
    """Each pull (and serve) beside its floor from the same run, and the
    ratio; "" when the rows have no floor line."""
    out = []
    engines = (("redis", "Redis Cluster", "serve"),
               ("mooncake", "Mooncake", "serve_mooncake"))
    for store, label, serve in engines:
        raw, _ = first(rows, f"raw_{store}")
        raw_s = raw["get_sum_mibs"] if raw and "get_sum_mibs" in raw else ""
        for verify, pull in (("1", f"pull_{store}"),
                             ("0", f"pull_{store}_noverify")):
            fl, _ = first(rows, f"floor_{store}", verify=verify)
            if not fl:
                continue
            n = fl.get("nodes", "?")
            p, _ = first(rows, pull, nodes=n)
            out.append(row(f"{label}: {n} pulls" +
                           ("" if verify == "1" else " `--no-verify`"),
                           p, fl, raw_s))
        fl, _ = first(rows, f"{serve}_floor")
        if fl:
            p, _ = first(rows, serve)
            out.append(row(f"{label}: serve, 32 Hub clients", p, fl, ""))
    if not out:
        return ""
    head = ["| what | MiB/s | floor MiB/s | ratio | raw GET sum MiB/s |",
            "|---|---|---|---|---|"]
    # the latest run's (a rerun's lines follow the older ones)
    load = next((rest.split("load average at start: ", 1)[1].split(";")[0]
                 for name, _, rest in reversed(rows)
                 if name in ("bed", "rerun") and "load average at start" in rest),
                "?")
    return ("\n".join(head + out) + "\n\nLoad average at the start of "
            f"the latest run: {load} (2 cores, shared with other jobs; the "
            "`rerun` lines below give each run's start and end).\n")


def row(what, pull, floor, raw):
    pm = pull.get("mibs") if pull else None
    fm = floor.get("mibs")
    ratio = ""
    if floor.get("ok") not in (None, floor.get("nodes"),
                               floor.get("clients")):
        # a floor that did not complete everywhere is no floor
        fm = f"failed ({floor.get('ok')} of {floor.get('nodes') or floor.get('clients')} ok)"
    elif pm and fm and float(fm) > 0:
        ratio = f"{float(pm) / float(fm):.2f}"
    ok = ""
    if pull and pull.get("ok") not in (None, pull.get("nodes"),
                                       pull.get("clients")):
        ok = f" ({pull.get('ok')} ok)"
    return f"| {what} | {pm or '-'}{ok} | {fm} | {ratio or '-'} | {raw or '-'} |"


def table(rows):
    out = ["| scenario | result |", "|---|---|"]
    for name, _, rest in rows:
        out.append(f"| `{name}` | {rest.replace('|', '/')} |")
    return "\n".join(out) + "\n"


def size_sections(res, plotdir):
    """A section for each results-*.txt beside res."""
    out = []
    for path in sorted(glob.glob(os.path.join(os.path.dirname(res),
                                              "results-*.txt"))):
        rows = parse(path)
        head = next((kv for name, kv, _ in rows
                     if name in ("bed", "rerun")), None)
        if not head:
            continue
        n, mib = head.get("nodes", "?"), head.get("mib", "?")
        size = f"{int(mib) // 1024} GiB" if mib.isdigit() and \
            int(mib) % 1024 == 0 else f"{mib} MiB"
        tag = os.path.basename(path)[len("results-"):-len(".txt")]
        when = next((rest.split(" on ", 1)[1].split(";")[0]
                     for name, _, rest in reversed(rows)
                     if name in ("bed", "rerun") and " on " in rest), "?")
        sec = [f"### The pulls at {size} ({when})\n"]
        ft = floor_table(rows)
        if ft:
            sec.append("Each pull beside its floor from the same run "
                       "(bench/floor.c: the same work with the engine's "
                       "raw client):\n\n" + ft)
        sec.append(table(rows))
        labels, values = pull_bars(rows, n)
        png = f"throughput-{tag}.png"
        if labels and bars(os.path.join(plotdir, png),
                           f"{n} nodes, {size}: aggregate throughput",
                           labels, values):
            sec.append(f"\n![Pulls at {size}](fleet/{png})\n")
        sec.append(f"\nRaw lines in [fleet/{os.path.basename(path)}]"
                   f"(fleet/{os.path.basename(path)}).\n")
        out.append("\n".join(sec))
    return "\n".join(out) or "(no run at another size recorded)\n"


def main():
    res, docs = sys.argv[1], sys.argv[2]
    rows = parse(res)
    plotdir = os.path.join(docs, "fleet")
    os.makedirs(plotdir, exist_ok=True)
    bed, _ = first(rows, "bed")
    n = bed.get("nodes", "?") if bed else "?"
    plots = []
    labels, values = pull_bars(rows, n)
    for name, store in (("mount", "redis"), ("mount_mooncake", "mooncake")):
        mnt, _ = first(rows, name)
        if mnt and "mibs" in mnt:
            labels.append(f"{store}: mount x{n}")
            values.append(mnt["mibs"])
    for name, store in (("serve", "redis"), ("serve_mooncake", "mooncake")):
        srv, _ = first(rows, name)
        if srv and "mibs" in srv:
            labels.append(f"{store}: serve x32")
            values.append(srv["mibs"])
        for nodes in ("1", "2"):
            srv, _ = first(rows, name.replace("serve", "serve2"),
                           serve_nodes=nodes)
            if srv and "mibs" in srv:
                labels.append(f"{store}: {nodes} serve node{'s' if nodes == '2' else ''} x32")
                values.append(srv["mibs"])
    png = os.path.join(plotdir, "throughput.png")
    if labels and bars(png, f"{n} nodes on one machine: aggregate throughput",
                       labels, values):
        plots.append(("throughput.png", "Aggregate throughput per scenario"))
    lat_l, lat_v = [], []
    what = {"conn": "1% refused", "chunk": "1% cuts",
            "chunk_data": "1% cuts, data"}
    for name, kv, rest in rows:
        engine = {"latency": "Redis", "latency_cluster": "Cluster",
                  "latency_mooncake": "Mooncake"}.get(name)
        if engine and "mibs" in kv:
            if rest.startswith("direct"):
                lat_l.append(f"{engine}: direct")
            else:
                lat_l.append(f"{engine}: 5 ms + " +
                             what.get(kv.get("loss"), "?"))
            if kv.get("ok") != kv.get("nodes"):
                lat_l[-1] += f" ({kv.get('err', '?')} failed)"
            lat_v.append(kv["mibs"])
    if lat_v and bars(os.path.join(plotdir, "latency.png"),
                      f"{n} pulls: direct vs through the proxy",
                      lat_l, lat_v, rotate=-30):
        plots.append(("latency.png", "Pull throughput through the proxy"))
    # when the results were measured (not when this page was written)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC",
                          time.gmtime(os.path.getmtime(res)))
    when = f"Measured {stamp}"
    if any(name == "rerun" for name, _, _ in rows):
        when = ("Measured in the run of the `bed` line; the scenarios a "
                "`rerun` line names were measured again later, with the "
                "sizes it gives, and their lines replace that run's")
    ft = floor_table(rows)
    if ft:
        ft = ("Each pull beside its floor from the same run "
              "(bench/floor.c: the same work with the engine's raw "
              "client):\n\n" + ft + "\n")
    body = ft + table(rows) + f"\n{when}; raw lines in " \
        "[fleet/results.txt](fleet/results.txt).\n"
    pl = "\n".join(f"![{t}](fleet/{f})\n" for f, t in plots) or \
        "(no plot: gnuplot is not installed)\n"
    tmpl = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "fleet.md.in")
    with open(tmpl, encoding="utf-8") as f:
        page = f.read()
    page = page.replace("@RESULTS@", body).replace("@PLOTS@", pl)
    page = page.replace("@SIZES@", size_sections(res, plotdir))
    with open(os.path.join(docs, "fleet.md"), "w", encoding="utf-8") as f:
        f.write(page)
    print(f"report.py: wrote {os.path.join(docs, 'fleet.md')}")


if __name__ == "__main__":
    main()
