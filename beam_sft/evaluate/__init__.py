"""Task metrics for generated assistant turns: one scorer (``metrics``), the turns it scores (``turns``),
and ``beam-sft eval`` (local generation or an OpenAI-compatible server).

Sits above ``harmony/`` and ``dataset_folder/`` and below ``train/``: train may import it, it imports no train.
"""
