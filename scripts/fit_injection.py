"""Fit the injection decision's weights and operating points on the prompt stream's dev split.

    python scripts/fit_injection.py [--shared ../shared]

Runs the stream's searches once (``lore.bench.stream.observe``), fits the gate (one
logistic score per prompt: does any memory apply?) and the item score (per hit) on
the dev sessions only, then picks, on dev only, the gate and item thresholds that
leave the most unanswerable prompts empty while the hit rate stays within 5 points
of injecting always. Prints the ``InjectSettings`` to paste into
``lore/rank/inject.py``. The test split is never read.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

import numpy as np

from lore.bench import stream
from lore.context import decide
from lore.rank import inject

L2 = 1.0  # ridge on every weight but the bias: 12 weights from ~150 prompts
MAX_HIT_DROP = 0.05
ITEM_THRESHOLDS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3)


def logistic_fit(rows: list[list[float]], labels: list[float]) -> list[float]:
    """Ridge-penalised logistic regression by Newton's method (a dozen features: exact in a few steps)."""
    x, y = np.asarray(rows, dtype=float), np.asarray(labels, dtype=float)
    w = np.zeros(x.shape[1])
    ridge = L2 * np.diag(np.r_[0.0, np.ones(x.shape[1] - 1)])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-x @ w))
        gradient = x.T @ (p - y) + ridge @ w
        hessian = (x.T * (p * (1 - p))) @ x + ridge
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if float(np.abs(step).max()) < 1e-9:
            break
    return [round(float(v), 4) for v in w]


def training_rows(observed: list[stream.Observed], path: str) -> tuple[list[list[float]], list[float], list[list[float]], list[float]]:
    vectors = path == "warm"
    gate_names, item_names = inject.gate_features(vectors), inject.item_features(vectors)
    gate_x, gate_y, item_x, item_y = [], [], [], []
    off = inject.DEFAULT_SETTINGS._replace(enabled=False)
    for seen in observed:
        response = getattr(seen, path)
        if response is None or not response.hits:
            continue
        decision = decide(response, project=seen.turn.project, null=seen.null, settings=off)
        if decision.vectors != vectors:  # a declined cold prompt answered by the whole pipeline
            continue
        _, prompt, _ = inject.judge(
            [inject.Hit(h.id, h.project, h.title, h.content, h.channel_scores.get("vector", 0.0) if vectors else None)
             for h in response.hits[:5]], response.query, response.term_idf, project=seen.turn.project, null=seen.null)
        relevant = set(seen.turn.relevant)
        found = any(j.id in relevant for j in decision.judged)
        if not relevant or found:
            gate_x.append([prompt.get(n, 0.0) for n in gate_names])
            gate_y.append(1.0 if relevant else 0.0)
        for judged in decision.judged:
            item_x.append([judged.evidence.get(n, 0.0) for n in item_names])
            item_y.append(1.0 if judged.id in relevant else 0.0)
    return gate_x, gate_y, item_x, item_y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", type=Path, default=Path("../shared"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lore-fit-"))
    stores = stream.observe(args.shared, work, print)
    dev = stream._split(stores, "dev")
    fitted: dict[str, object] = {}
    for path in stream.PATHS:
        gate_x, gate_y, item_x, item_y = training_rows(dev, path)
        fitted[f"{path}_gate"] = tuple(logistic_fit(gate_x, gate_y))
        fitted[f"{path}_item"] = tuple(logistic_fit(item_x, item_y))
        print(f"{path}: gate from {len(gate_y)} prompts ({int(sum(gate_y))} answerable), items from {len(item_y)} hits")
    settings = inject.DEFAULT_SETTINGS._replace(**fitted)  # type: ignore[arg-type]
    for path in stream.PATHS:
        always = stream.measures(stream.replay(dev, path, "always", settings))["hit"]
        best = None
        for gate in (g / 100 for g in range(0, 91)):
            for item in ITEM_THRESHOLDS:
                tried = (settings._replace(warm_gate_threshold=gate, warm_item_threshold=item) if path == "warm"
                         else settings._replace(cold_gate_threshold=gate, cold_item_threshold=item))  # fmt: skip
                figures = stream.measures(stream.replay(dev, path, "lore", tried))
                if figures["hit"] + 1e-9 < always - MAX_HIT_DROP:
                    continue
                key = (figures["left_empty"], figures["precision"], -gate)
                if best is None or key > best[0]:
                    best = (key, gate, item, figures)
        assert best is not None
        _, gate, item, figures = best
        for other in ITEM_THRESHOLDS:  # the trade-off the item threshold makes, each at its best gate
            shown = [(f["left_empty"], g, f) for g in (x / 100 for x in range(0, 91))
                     for f in [stream.measures(stream.replay(dev, path, "lore", settings._replace(
                         **({"warm_gate_threshold": g, "warm_item_threshold": other} if path == "warm"
                            else {"cold_gate_threshold": g, "cold_item_threshold": other}))))]
                     if f["hit"] + 1e-9 >= always - MAX_HIT_DROP]  # fmt: skip
            if shown:
                empty, g, f = max(shown, key=lambda t: (t[0], -t[1]))
                print(f"  item {other}: gate {g} empty {empty} precision {f['precision']} chars/prompt {f['chars_per_prompt']} items/block {f['items_per_block']}")
        print(f"{path}: always hits {always}; gate {gate}, item {item}: {figures}")
        settings = (settings._replace(warm_gate_threshold=gate, warm_item_threshold=item) if path == "warm"
                    else settings._replace(cold_gate_threshold=gate, cold_item_threshold=item))  # fmt: skip
    print(repr(settings))
    assert all(math.isfinite(v) for v in settings.warm_gate)


if __name__ == "__main__":
    main()
