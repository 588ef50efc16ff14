"""Near-duplicate pairs with datasketch (MinHash + MinHashLSH), for the dedup benchmark.

Reads a JSONL file (one JSON list of code tokens per module, as the Rust tokenizer produced
them), builds the same shingles (k consecutive tokens), MinHash signatures with the same number
of permutations and an LSH index at the same threshold, queries every module and keeps the
candidate pairs whose estimated Jaccard reaches the threshold (as the Rust side does). Writes the
pairs as "i j" lines and prints the elapsed seconds of hashing, indexing and querying as JSON.

usage: datasketch_near.py TOKENS.jsonl PAIRS.txt SHINGLE_SIZE NUM_PERM THRESHOLD
"""

import json
import sys
import time

from datasketch import MinHash, MinHashLSH


def main() -> None:
    tokens_path, pairs_path = sys.argv[1], sys.argv[2]
    k, num_perm, threshold = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    with open(tokens_path, encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    started = time.perf_counter()
    sigs = []
    for toks in docs:
        if len(toks) < k:
            shingles = {" ".join(toks).encode()} if toks else set()
        else:
            shingles = {" ".join(toks[i : i + k]).encode() for i in range(len(toks) - k + 1)}
        m = MinHash(num_perm=num_perm)
        m.update_batch(list(shingles))
        sigs.append((m, bool(shingles)))
    hashed = time.perf_counter()
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    for i, (m, nonempty) in enumerate(sigs):
        if nonempty:
            lsh.insert(i, m)
    indexed = time.perf_counter()
    pairs = set()
    for i, (m, nonempty) in enumerate(sigs):
        if not nonempty:
            continue
        for j in lsh.query(m):
            if j != i:
                a, b = min(i, j), max(i, j)
                if (a, b) not in pairs and sigs[a][0].jaccard(sigs[b][0]) >= threshold:
                    pairs.add((a, b))
    done = time.perf_counter()
    with open(pairs_path, "w", encoding="utf-8") as f:
        for a, b in sorted(pairs):
            f.write(f"{a} {b}\n")
    print(json.dumps({
        "hash_s": hashed - started,
        "index_s": indexed - hashed,
        "query_s": done - indexed,
        "total_s": done - started,
        "b_r": list(lsh.b_r) if hasattr(lsh, "b_r") else [lsh.b, lsh.r],
        "pairs": len(pairs),
    }))


if __name__ == "__main__":
    main()
