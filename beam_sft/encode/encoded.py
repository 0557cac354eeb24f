"""``Encoded``: one encoded row, the value every encoder returns (ids and masks as numpy arrays)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ID_DTYPE = np.int32  # the prepared folder's input_ids type (beam_sft.dataset_folder.layout)
MASK_DTYPE = np.int8


@dataclass
class Encoded:
    """``input_ids`` and ``assistant_masks`` (weights applied); ``fallback``: the fast encoder handed
    this row to the template encoder; ``native``: its text came from the Python transcription of
    Beam's template (``encode/fast/native.py``), not from running the template."""

    input_ids: np.ndarray
    assistant_masks: np.ndarray
    fallback: bool = False
    native: bool = False
