"""The orchestrator: sources -> convert -> mix -> encode -> verify -> publish (``beam-sft prepare``),
and the merge of a sharded run (``beam-sft merge-shards``).

- ``config.py``: ``PrepareConfig`` / ``SourceSpec``, the typed configuration;
- ``resolved.py``: the config interpreted once (``resolve``), read by the fingerprint, the records and the encode step;
- ``records.py``: reading every source's raw records into one Arrow file (the serial step);
- ``batch.py``: the encode step (convert, mix, encode, length policy, status);
- ``encode_pool.py``: the worker processes that run it over the records file, batch by batch;
- ``pipeline.py``: ``prepare(config)``; ``cache.py``: fingerprints and the cache;
- ``shards.py``: ``merge_shards``; ``cli.py``: the two commands.

What a prepared folder is, and every read and write of one, is ``beam_sft.dataset_folder``.
"""

from beam_sft.prepare.config import PrepareConfig, SourceSpec, load_prepare_config
from beam_sft.prepare.pipeline import prepare
from beam_sft.prepare.shards import merge_shards

__all__ = ["PrepareConfig", "SourceSpec", "load_prepare_config", "merge_shards", "prepare"]
