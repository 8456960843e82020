#!/usr/bin/env python3
"""Write lore's bundled embedding model from the WordLlama wheel (MIT).

WordLlama's default model ("l2_supercat", 256 dims) is a static token
embedding table trained from the token codebooks of several LLMs that share
the LLaMA 2 vocabulary (docs/embedding-model.md). Its encoder is exactly
model2vec's: tokenize without special tokens, mean the token vectors,
normalise. So the table and the tokenizer can be stored in model2vec's
format and read by ``model2vec.StaticModel`` and lore's light QueryEncoder
alike, with no WordLlama code at run time.

The wheel is a registry download, so no Hub access is needed::

    pip download wordllama==0.4.0.post1 --no-deps -d /tmp/wl
    python scripts/convert_wordllama.py /tmp/wl/wordllama-0.4.0.post1-*.whl --out lore/model

Needs only the standard library and numpy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import zipfile
from pathlib import Path

import numpy as np

WEIGHTS = "wordllama/weights/l2_supercat_256.safetensors"
TOKENIZER = "wordllama/tokenizers/l2_supercat_tokenizer_config.json"
LICENSE_SUFFIX = "/LICENSE"


def read_safetensors(blob: bytes) -> dict[str, np.ndarray]:
    (header_len,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + header_len])
    dtypes = {"F16": "<f2", "F32": "<f4"}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        raw = blob[8 + header_len + start : 8 + header_len + end]
        out[name] = np.frombuffer(raw, dtype=dtypes[info["dtype"]]).reshape(info["shape"])
    return out


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    names = {np.dtype("<f2"): "F16", np.dtype("<f4"): "F32"}
    header: dict[str, object] = {"__metadata__": {"source": "wordllama l2_supercat_256"}}
    offset = 0
    for name, array in tensors.items():
        header[name] = {"dtype": names[array.dtype], "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # safetensors aligns the data to 8 bytes
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", len(encoded)))
        handle.write(encoded)
        for array in tensors.values():
            handle.write(np.ascontiguousarray(array).tobytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    with zipfile.ZipFile(args.wheel) as wheel:
        weights = read_safetensors(wheel.read(WEIGHTS))
        tokenizer = wheel.read(TOKENIZER)
        license_name = next(n for n in wheel.namelist() if n.endswith(LICENSE_SUFFIX) and ".dist-info/" in n)
        license_text = wheel.read(license_name).decode()
    (table,) = weights.values()
    args.out.mkdir(parents=True, exist_ok=True)
    write_safetensors(args.out / "model.safetensors", {"embeddings": table.astype("<f2")})
    (args.out / "tokenizer.json").write_bytes(tokenizer)
    config = {
        "model_type": "model2vec",
        "architectures": ["StaticModel"],
        "tokenizer_name": "dleemiller/word-llama-l2-supercat",
        "source": f"{args.wheel.name}: {WEIGHTS}",
        "hidden_dim": int(table.shape[1]),
        "seq_length": 1000000,
        "normalize": True,
        "pooling": "mean",
        "max_length": 512,
        "embedding_dtype": "float16",
    }
    (args.out / "config.json").write_text(json.dumps(config, indent=4) + "\n")
    (args.out / "LICENSE").write_text(
        "lore's bundled embedding model is WordLlama's l2_supercat_256 table and tokenizer,\n"
        "converted to model2vec's file format by scripts/convert_wordllama.py.\n"
        "WordLlama: https://github.com/dleemiller/WordLlama, distributed under this licence:\n\n" + license_text
    )
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        digest = hashlib.sha256((args.out / name).read_bytes()).hexdigest()
        print(f"{name}: {(args.out / name).stat().st_size} bytes, sha256 {digest}")


if __name__ == "__main__":
    main()
