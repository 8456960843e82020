"""The BM25F formula itself: one scalar core for the numpy channel and the hook's cold path.

``lore.index.bm25`` applies ``impact`` to numpy arrays of a term's postings;
``lore.index.cold`` applies it to one row's floats. Both evaluate the same
expression, so the same inputs give bit-identical scores. The prompt hook's cold
path loads this module, not ``lore.index.bm25`` (numpy-shaped, dataclasses).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import numpy as np

# Two fields, title then body, in every (..., 2) array of ``lore.index.bm25``, scored as one: the
# frequencies are summed and normalised by the record's whole length, which is the
# textbook BM25 over all of a record's text. A title boost of 1.5 with per-field
# length normalisation (BM25F) lost to it on the dev split of the demo, memory and
# known-item sets (docs/search.md, "The lexical channel"); the fields stay apart in
# the forward index so that a boost can be measured again without a rebuild format.
FIELD_BOOSTS = (1.0, 1.0)
K1 = 1.2
B = 0.75


Values = TypeVar("Values", float, "np.ndarray")


def impact(tf: Values, lengths: Values, idf: float, average: float, *, k1: float = K1, b: float = B) -> Values:
    """BM25 contribution of one term to rows with boosted frequency ``tf`` and length ``lengths``.

    The single formula of every path (base alone, base plus delta, numpy arrays or, on
    the hook's cold path, one row's floats): the same inputs give bit-identical scores.
    """
    norm = 1.0 - b + b * lengths / (average if average > 0 else 1.0)
    pseudo = tf / norm
    return idf * pseudo * (k1 + 1.0) / (k1 + pseudo)


def idf_value(n: int, df: int) -> float:
    return math.log1p((n - df + 0.5) / (df + 0.5))
