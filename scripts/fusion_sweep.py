#!/usr/bin/env python3
"""Replay fusion variants over cached channel scores on the DEV splits of the benchmark sets.

The evidence behind the fusion defaults in docs/search.md ("Fusion"). For every
question of every set it computes once, with lore's own index and model: the
BM25 score of every record, the cosine of every record to the raw query vector,
to the mean vector of BM25's top 5 (for the vector feedback) and to the HyDE-lite
vector, and the textbook BM25's scores. Fusion variants are then replayed in numpy
(no stages), fast enough to sweep a grid. Only dev questions are scored unless
``--split test`` is given, which nothing in docs/search.md used.

    python scripts/fusion_sweep.py --work /tmp/lore-sweep            # builds indexes once, then sweeps
    python scripts/fusion_sweep.py --work /tmp/lore-sweep --sets memory,demo
"""

from __future__ import annotations

import argparse
import itertools
import math
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the harness (benchmarks/) of this checkout


def build_cache(name: str, shared: Path, work: Path) -> dict[str, Any]:
    from benchmarks import corpora, matrix
    from benchmarks import sets as bench_sets
    from benchmarks.quality import Searcher
    from benchmarks.textbook import TextbookBM25
    from lore import analysis
    from lore.rank.query import hyde_document

    path = work / f"cache-{name}.pkl"
    if path.exists():
        with path.open("rb") as handle:
            cached: dict[str, Any] = pickle.load(handle)
            return cached
    es = bench_sets.all_sets(shared)[name]()
    data_dir = es.data_dir
    if data_dir is None:
        data_dir = work / f"{name}-data"
        if not data_dir.exists():
            corpora.write_decisions(data_dir, es.raws)
    searcher = Searcher(data_dir, work / f"{name}-index")
    searcher.build()
    reader = searcher.session.open()
    encoder = searcher.session.get_encoder()
    table = reader.table
    vectors = np.asarray(reader.vectors, dtype=np.float32)
    active = np.asarray(reader.active_rows if reader.active_rows is not None else [True] * len(table), dtype=bool)
    textbook = TextbookBM25((rid, text) for rid, text, _ in matrix.store_texts(searcher))
    row_of = {rid: n for n, rid in enumerate(table.ids)}
    out: dict[str, Any] = {"ids": [es.label_of.get(i, i) for i in table.ids], "active": active, "q": {}}
    for qid, text in es.questions.items():
        terms = analysis.unique_terms(text)
        bm = np.where(active, reader.bm25.scores(terms), 0).astype(np.float32)
        top5 = np.argsort(-bm)[:5]
        top5 = top5[bm[top5] > 0]
        hyde = " ".join([hyde_document(text), *[table.doc(int(r))["title"] for r in top5[:3]]])
        query_vec, hyde_vec = (v.astype(np.float32) for v in encoder.encode([text, hyde]))
        tb = np.zeros(len(table), dtype=np.float32)
        for n, score in textbook.scores(text).items():
            tb[row_of[textbook.ids[n]]] = score
        out["q"][qid] = {
            "split": es.split[qid], "rel": es.qrels.get(qid), "bm": bm, "tb": tb,
            "cos": (vectors @ query_vec).astype(np.float32), "cos_h": (vectors @ hyde_vec).astype(np.float32),
            "vm": (vectors @ vectors[top5].mean(axis=0)).astype(np.float32) if len(top5) else np.zeros(len(table), np.float32),
        }  # fmt: skip
    with path.open("wb") as handle:
        pickle.dump(out, handle)
    return out


def top(scores: np.ndarray, k: int, active: np.ndarray) -> np.ndarray:
    masked = np.where(active, scores, -np.inf)
    part = np.argpartition(-masked, k)[:k]
    return part[np.argsort(-masked[part], kind="stable")]


def channel(q: dict[str, Any], name: str) -> np.ndarray:
    if name.startswith("fb"):  # the vector channel with feedback weight beta: q + beta * mean(top 5 BM25)
        return q["cos"] + float(name[2:]) * q["vm"]  # unnormalised: fine for a division by the channel's best
    return q[name]


def own_top(q: dict[str, Any], name: str, depth: int, active: np.ndarray) -> np.ndarray:
    s = channel(q, name)
    lexical = name in ("bm", "tb")
    order = top(np.where(s > 0, s, -np.inf) if lexical else s, depth, active)
    return order[s[order] > 0] if lexical else order


def fused(q: dict[str, Any], weights: dict[str, float], active: np.ndarray, method: str, depth: int = 30) -> np.ndarray:
    total = np.full(len(active), -np.inf)
    tops = {name: own_top(q, name, depth, active) for name in weights}
    candidates = np.array(sorted({int(r) for order in tops.values() for r in order}), dtype=int)
    if not len(candidates):
        return total
    acc = np.zeros(len(candidates))
    for name, weight in weights.items():
        order = tops[name]
        if not len(order) or not weight:
            continue
        if method == "rrf":
            ranks = {int(r): n for n, r in enumerate(order, start=1)}
            acc += np.array([weight / (60 + ranks[c]) if c in ranks else 0.0 for c in candidates])
        else:  # score: the channel's score over its best
            s = channel(q, name)
            acc += weight * np.clip(s[candidates] / (s[order[0]] or 1.0), 0, None)
    total[candidates] = acc
    return total


def measure(es: dict[str, Any], scorer: Any, split: str, scifact: bool) -> dict[str, float]:
    rows = []
    for q in es["q"].values():
        if q["split"] != split or not q["rel"]:
            continue
        ids = [es["ids"][i] for i in top(scorer(q), 10, es["active"])]
        rel = q["rel"]
        if scifact:
            dcg = sum(rel.get(d, 0) / math.log2(n + 2) for n, d in enumerate(ids))
            ideal = sum(g / math.log2(n + 2) for n, g in enumerate(sorted(rel.values(), reverse=True)[:10]))
            rows.append({"nDCG@10": dcg / ideal if ideal else 0.0})
        else:
            rows.append({"R@5": sum(d in rel for d in ids[:5]) / len(rel), "R@10": sum(d in rel for d in ids) / len(rel),
                         "MRR@10": next((1 / (n + 1) for n, d in enumerate(ids) if d in rel), 0.0)})  # fmt: skip
    return {k: round(float(np.mean([r[k] for r in rows])), 3) for k in rows[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared")
    parser.add_argument("--sets", default="scifact,knownitem,memory,demo")
    parser.add_argument("--split", default="dev", choices=("dev", "test"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    names = args.sets.split(",")
    caches = {n: build_cache(n, args.shared, args.work) for n in names}

    def alone(field: str) -> Any:
        return lambda q: np.where(q[field] > 0, q[field], -np.inf) if field in ("bm", "tb") else q[field]

    systems: dict[str, Any] = {"textbook BM25": alone("tb"), "lore BM25 alone": alone("bm"),
                               "vector alone": alone("cos"), "HyDE alone": alone("cos_h")}  # fmt: skip
    for method, (beta, wv, wh) in itertools.product(("rrf", "score"), itertools.product((0, 0.25, 0.5, 1), (0.2, 0.5, 0.8), (0, 0.2))):
        weights = {"bm": 1.0, f"fb{beta}": wv, **({"cos_h": wh} if wh else {})}
        systems[f"{method} vector {wv} (feedback {beta}) hyde {wh}"] = (
            lambda q, w=weights, m=method, es=None: fused(q, w, q["_active"], m))
    for label, scorer in systems.items():
        cells = []
        for n in names:
            es = caches[n]
            for q in es["q"].values():
                q["_active"] = es["active"]
            cells.append(f"{n} " + " ".join(f"{v:.3f}" for v in measure(es, scorer, args.split, n == "scifact").values()))
        print(f"{label:44s} | " + " | ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
