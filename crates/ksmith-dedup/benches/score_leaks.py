"""Scores decontamination on a work directory that crawled planted leaks (see the `plant_leaks`
example) next to a real corpus: recall per way of leaking, over the leaked modules that reached
dedup (runnable), and false drops among the other modules, each listed for reading.

Reads modules.parquet and dedup.parquet of any schema version (so it scores the code before
and after a change alike) and the plant's manifest.jsonl.

usage: score_leaks.py WORKDIR LEAKS_REPO_NAME MANIFEST.jsonl
"""

import collections
import json
import sys

import pyarrow.parquet as pq


def main() -> None:
    workdir, repo, manifest_path = sys.argv[1], sys.argv[2], sys.argv[3]
    modules = pq.read_table(f"{workdir}/modules.parquet").to_pylist()
    dedup = {r["module_id"]: r for r in pq.read_table(f"{workdir}/dedup.parquet").to_pylist()}
    by_file = {(m["path"], m["class_name"]): m for m in modules if m["repo"] == repo}
    with open(manifest_path, encoding="utf-8") as f:
        manifest = [json.loads(line) for line in f if line.strip()]
    per = collections.OrderedDict()
    missed = collections.defaultdict(list)
    for e in manifest:
        s = per.setdefault(e["leak"], {"planted": 0, "extracted": 0, "runnable": 0, "caught": 0})
        s["planted"] += 1
        m = by_file.get((e["file"], e["class"]))
        if m is None or m["status"] != "ok":
            continue
        s["extracted"] += 1
        row = dedup.get(m["id"])
        if row is None:
            continue
        s["runnable"] += 1
        if row["method"] == "contamination":
            s["caught"] += 1
        else:
            missed[e["leak"]].append((e["problem"], row["method"], row.get("duplicate_of")))
    print("| leak | planted | extracted | runnable (in dedup) | caught | recall |")
    print("|---|---|---|---|---|---|")
    for leak, s in per.items():
        recall = s["caught"] / s["runnable"] if s["runnable"] else float("nan")
        print(f"| {leak} | {s['planted']} | {s['extracted']} | {s['runnable']} | {s['caught']} | {recall:.3f} |")
    others = [m for m in modules if m["repo"] != repo and m["id"] in dedup]
    false = [m for m in others if dedup[m["id"]]["method"] == "contamination"]
    share = len(false) / len(others) if others else float("nan")
    print(f"\nfalse drops: {len(false)} of {len(others)} non-benchmark runnable modules ({share:.4%})")
    for m in false:
        r = dedup[m["id"]]
        print(f"  {m['repo']} {m['path']} {m['class_name']} -> {r['duplicate_of']} sim={r['similarity']}")
    for leak, rows in missed.items():
        print(f"\nmissed {leak}: {len(rows)}")
        for problem, method, dup in rows:
            print(f"  {problem}: {method} {dup or ''}")


if __name__ == "__main__":
    main()
