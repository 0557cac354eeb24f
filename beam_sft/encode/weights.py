"""Per-turn weights: an assistant turn with weight 0 stays in the context but leaves the loss.

Weights are applied after encoding, on the mask: the template marks each assistant message's
tokens as one run of 1s, in message order, so the k-th run belongs to the k-th assistant message and
a weight-0 message's run is zeroed. Both encoders use this same function, so they agree.
"""

from __future__ import annotations

import numpy as np

from beam_sft.errors import Rejection
from beam_sft.visible import quoted


def assistant_weights(messages: list[dict]) -> list[int]:
    """Per-turn weights (0 or 1) of the assistant messages, in order; a missing weight is 1.

    >>> assistant_weights([{"role": "user"}, {"role": "assistant", "weight": 0}, {"role": "assistant"}])
    [0, 1]
    """
    weights = []
    for message in messages:
        if message.get("role") == "assistant":
            weight = message.get("weight", 1)
            if weight is None:
                weight = 1
            if weight not in (0, 1) or isinstance(weight, bool):
                raise Rejection("bad_weight", f"assistant weight must be 0 or 1, got {quoted(weight)}")
            weights.append(int(weight))
    return weights


def apply_weights(mask: np.ndarray, turn_spans: list[tuple[int, int]], weights: list[int]) -> np.ndarray:
    """Zero the mask over the token span of every assistant turn whose weight is 0.

    ``turn_spans`` are the token ranges of the assistant turns, in message order, one per assistant
    message. When the counts differ the turns cannot be told apart, which only matters if some weight
    is 0.

    >>> apply_weights(np.array([0, 1, 1, 0, 1]), [(1, 3), (4, 5)], [0, 1]).tolist()
    [0, 0, 0, 0, 1]
    """
    if all(weights):
        return mask
    if len(turn_spans) != len(weights):
        raise Rejection(
            "weight_unmapped",
            f"{len(weights)} assistant messages but the template marked {len(turn_spans)} trained spans, "
            "so per-turn weights cannot be applied",
        )
    mask = np.array(mask, dtype=np.int8, copy=True)
    for (start, end), weight in zip(turn_spans, weights, strict=True):
        if not weight:
            mask[start:end] = 0
    return mask
