"""The pure-Python tokenizer (``PureBpe``) gives the bundled model's ``tokenizers`` ids exactly.

A refresh of a few records and a query embed with it instead of loading the Rust
tokenizer (55-120 ms per process), so its ids, and the vectors made from them, must be
those of ``tokenizers`` for every text: checked over the repository's own texts
(docs, README, bench questions, test transcripts and store files: prose, code, paths,
JSON, long texts cut at 512 tokens) and over awkward characters.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lore.embedder import BUNDLED_MODEL_DIR, PureBpe, QueryEncoder, get_query_encoder

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 512


@pytest.fixture(scope="module")
def rust() -> object:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(BUNDLED_MODEL_DIR / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(LIMIT)
    return tokenizer


@pytest.fixture(scope="module")
def pure() -> PureBpe:
    loaded = PureBpe.load(BUNDLED_MODEL_DIR / "tokenizer.json")
    assert loaded is not None  # the bundled tokenizer has the shape it reproduces
    return loaded


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def repository_texts() -> list[str]:
    texts: list[str] = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        content = path.read_text(encoding="utf-8")
        texts.append(content[:6000])  # a long text: cut at 512 tokens
        texts.extend(p for p in content.split("\n\n") if p.strip())
    for path in sorted((ROOT / "lore" / "bench" / "data").glob("*.jsonl")):
        for line in path.read_bytes().splitlines()[:150]:
            texts.extend(_strings(orjson.loads(line)))
    data = ROOT / "tests" / "data"
    for path in sorted([*data.glob("transcripts/*.jsonl"), *data.glob("original-lore/**/*.jsonl")]):
        for line in path.read_bytes().splitlines()[:40]:
            try:
                texts.extend(s for s in _strings(orjson.loads(line)) if len(s) > 2)
            except orjson.JSONDecodeError:
                texts.append(line.decode("utf-8", "replace"))
    texts.extend(path.read_text(encoding="utf-8")[:3000] for path in sorted((ROOT / "lore" / "index").glob("*.py")))
    return list(dict.fromkeys(texts))


AWKWARD = [
    "", " ", "  ", "\n", "\t\tTabs\tand\r\nCRLF", "a", "▁", "▁▁▁ x", "x   ", "   leading",
    "Größe of the café ✓ naïve", "日本語のテキストと中文", "emoji 😀👍🏽 and flags 🇫🇷", "Ω≈ç√∫˜µ≤≥÷",
    "\x00\x01\x7f control", "zero\u200bwidth", "combining e\u0301 accents", "\ufeffBOM", "\U0001f9ec\U000e0001",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "x" * 5000, "ab " * 2000, "def f(x):\n    return x ** 2  # comment",
    "https://example.com/a/b?c=d&e=f#g", "lore/store/store.py:123 getUserById()", "C:\\Users\\me\\file.txt",
]  # fmt: skip


def test_the_pure_tokenizer_gives_the_rust_ids_for_the_repository_texts(rust, pure: PureBpe) -> None:  # type: ignore[no-untyped-def]
    texts = repository_texts() + AWKWARD
    assert len(texts) > 1500 and sum(len(t) > 2000 for t in texts) > 10
    expected = [encoding.ids for encoding in rust.encode_batch_fast(texts, add_special_tokens=False)]
    assert sum(len(ids) == LIMIT for ids in expected) > 10  # texts cut at the token limit are in
    for text, ids in zip(texts, expected, strict=True):
        if any(token in text for token in ("<unk>", "<s>", "</s>")):
            assert pure.token_ids(text, LIMIT) is None  # left to tokenizers (docs/index.md names `<s>`)
        else:
            assert pure.token_ids(text, LIMIT) == ids, text[:200]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_the_pure_tokenizer_gives_the_rust_ids_for_any_text(text: str) -> None:
    from tokenizers import Tokenizer

    found = _pure_once().token_ids(text)
    if found is None:
        assert any(token in text for token in ("<unk>", "<s>", "</s>"))
        return
    rust = _rust_once()
    assert isinstance(rust, Tokenizer)
    assert found == rust.encode(text, add_special_tokens=False).ids


_CACHE: dict[str, object] = {}


def _pure_once() -> PureBpe:
    if "pure" not in _CACHE:
        _CACHE["pure"] = PureBpe.load(BUNDLED_MODEL_DIR / "tokenizer.json")
    value = _CACHE["pure"]
    assert isinstance(value, PureBpe)
    return value


def _rust_once() -> object:
    if "rust" not in _CACHE:
        from tokenizers import Tokenizer

        _CACHE["rust"] = Tokenizer.from_file(str(BUNDLED_MODEL_DIR / "tokenizer.json"))
    return _CACHE["rust"]


def test_texts_with_an_added_token_or_a_lone_surrogate_go_to_the_rust_tokenizer(pure: PureBpe) -> None:
    for text in ["a <s> b", "</s>", "x<unk>y", "bad \ud800 surrogate"]:
        assert pure.token_ids(text) is None
    encoder = QueryEncoder(BUNDLED_MODEL_DIR)
    assert encoder._tokenizer is None
    vectors = encoder.encode(["a <s> b"])  # handled by tokenizers, loaded for it
    assert encoder._tokenizer is not None and np.linalg.norm(vectors[0]) > 0.99


def test_the_query_encoder_makes_the_same_vectors_with_either_tokenizer() -> None:
    texts = [t for t in repository_texts() if "<s>" not in t][:400] + AWKWARD
    light = QueryEncoder(BUNDLED_MODEL_DIR)
    light.PURE_CHARACTERS = 10**9  # every text through PureBpe
    rust_only = QueryEncoder(BUNDLED_MODEL_DIR)
    rust_only.PURE_CHARACTERS = -1  # every text through tokenizers
    by_pure = np.concatenate([light.encode(texts[i : i + 8]) for i in range(0, len(texts), 8)])
    assert light._tokenizer is None  # never loaded
    by_rust = rust_only.encode(texts)
    assert np.array_equal(by_pure, by_rust)
    assert light.median_token_length == rust_only.median_token_length  # the vocabulary is the same too
    assert sorted(light.pure.vocabulary() if light.pure else []) == sorted(rust_only.tokenizer.get_vocab())


def test_a_tokenizer_of_another_shape_is_left_to_tokenizers(tmp_path: Path) -> None:
    data = orjson.loads((BUNDLED_MODEL_DIR / "tokenizer.json").read_bytes())
    data["pre_tokenizer"] = {"type": "Whitespace"}
    (tmp_path / "tokenizer.json").write_bytes(orjson.dumps(data))
    assert PureBpe.load(tmp_path / "tokenizer.json") is None
    (tmp_path / "tokenizer.json").write_bytes(b"not json")
    assert PureBpe.load(tmp_path / "tokenizer.json") is None


def test_the_configured_encoder_uses_the_pure_tokenizer_for_the_bundled_model() -> None:
    encoder = get_query_encoder(str(BUNDLED_MODEL_DIR))
    assert isinstance(encoder, QueryEncoder) and encoder.pure is not None


def test_the_rust_tokenizer_takes_over_once_a_process_has_tokenized_its_worth_of_characters() -> None:
    encoder = QueryEncoder(BUNDLED_MODEL_DIR)
    text = "retry the payment call with exponential backoff and jitter " * 5  # 300 characters
    first = encoder.encode([text])
    assert encoder._tokenizer is None and encoder._pure_characters == len(text)
    for _ in range(encoder.PURE_CHARACTERS // len(text) - 1):
        encoder.encode([text])
    assert encoder._tokenizer is None  # exactly at the budget
    last = encoder.encode([text])
    assert encoder._tokenizer is not None  # past it: loaded, and used from now on
    assert np.array_equal(first, last)
    big = QueryEncoder(BUNDLED_MODEL_DIR)
    big.encode([text] * (big.PURE_CHARACTERS // len(text) + 1))  # one call past the budget goes to tokenizers
    assert big._tokenizer is not None and big._pure_characters == 0


def test_word_by_word_gives_the_ids_of_the_whole_text(pure: PureBpe) -> None:
    # The bundled tokenizer has no token with a metaspace after another character: words tokenize alone.
    assert pure.by_word
    whole = PureBpe.load(BUNDLED_MODEL_DIR / "tokenizer.json")
    assert whole is not None
    whole.by_word = False
    texts = [t for t in repository_texts() if "<s>" not in t and "<unk>" not in t][:600] + AWKWARD
    for text in texts:
        assert pure.token_ids(text, LIMIT) == whole.token_ids(text, LIMIT), text[:200]


def test_a_token_joining_a_word_to_the_next_turns_word_by_word_off(tmp_path: Path) -> None:
    from tokenizers import Tokenizer

    data = orjson.loads((BUNDLED_MODEL_DIR / "tokenizer.json").read_bytes())
    model = data["model"]
    model["vocab"]["\u2581a\u2581the"] = len(model["vocab"])
    merges = model["merges"]
    merges.insert(0, ["\u2581a", "\u2581the"] if merges and not isinstance(merges[0], str) else "\u2581a \u2581the")
    (tmp_path / "tokenizer.json").write_bytes(orjson.dumps(data))
    joined = PureBpe.load(tmp_path / "tokenizer.json")
    assert joined is not None and not joined.by_word
    rust = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for text in ("retry a the payment", "a the", "data the a the"):
        assert joined.token_ids(text) == rust.encode(text, add_special_tokens=False).ids
    assert model["vocab"]["\u2581a\u2581the"] in (joined.token_ids("retry a the payment") or [])


def test_a_large_batch_gathers_from_a_float32_table_and_gets_the_same_vectors() -> None:
    """A build's batch converts the float16 table once; a query's few tokens read the memory map: same floats."""
    texts = [t for t in repository_texts() if "<s>" not in t][:300] + AWKWARD
    large = QueryEncoder(BUNDLED_MODEL_DIR)
    together = large.encode(texts)
    assert large._embedding32 is not None and large._embedding32.dtype == np.float32

    class Tripwire:
        """Stands in for the float16 memory map: a large batch must not gather from it."""

        def __len__(self) -> int:
            return len(large._embedding32)  # type: ignore[arg-type]

        def __getitem__(self, index: object) -> None:
            raise AssertionError("gathered from the float16 memory map")

    large.embedding = Tripwire()  # type: ignore[assignment]
    assert np.array_equal(large.encode(texts), together)  # (it did, before: the copy was made and not used)
    small = QueryEncoder(BUNDLED_MODEL_DIR)
    alone = np.concatenate([small.encode([text]) for text in texts])
    assert small._embedding32 is None  # no text had enough tokens for it
    assert np.array_equal(together, alone)


def test_a_write_checks_hundred_texts_gather_their_rows_without_copying_the_table() -> None:
    """~100 commit texts (under one token per table row) read the rows they need: no float32 copy of the table."""
    texts = [t for t in repository_texts() if "<s>" not in t]
    encoder = QueryEncoder(BUNDLED_MODEL_DIR)
    batch: list[str] = []
    tokens = 0
    for text in texts:
        count = len(encoder.token_ids([text])[0])
        if tokens + count >= len(encoder.embedding):
            break
        batch.append(text)
        tokens += count
    assert tokens > len(encoder.embedding) // 4  # enough to have made the copy before
    vectors = encoder.encode(batch)
    assert encoder._embedding32 is None
    alone = QueryEncoder(BUNDLED_MODEL_DIR)
    assert np.array_equal(vectors, np.concatenate([alone.encode([text]) for text in batch]))
