"""``beam-sft reason``: a teacher model writes the reasoning that trained turns lack.

Rows are converted exactly as ``beam-sft convert`` converts them (``beam_sft.convert.pipeline``,
the same ``--format``/``--columns``); between conversion and the missing-reasoning policy, each
trained assistant turn with no reasoning is sent to an OpenAI-compatible chat-completions endpoint
with the conversation before it and the turn's answer or tool calls, and the reply, once checked,
becomes the turn's ``reasoning_content``. Nothing else in the row changes.

Modules, one job each:

- ``prompt``  the versioned prompt file (``prompts/v1.txt``) and the request a turn becomes
- ``client``  HTTP to the endpoint: timeout, retries with backoff and Retry-After, the budget
- ``cache``   answers on disk keyed by content, one atomic file per answer
- ``checks``  a teacher's text -> kept, or a reason code (``beam_sft/reject_codes.py``, stage ``reason``)
- ``consistency`` the text against its turn, without a request (another tool named: ``teacher_inconsistent``)
- ``judge``   ``--judge``: a model's strict verdict on whether the reasoning leads to the turn
- ``fill``    a row -> the row with reasoning filled and its provenance in ``meta.reasoning``
- ``config``  ``TeacherConfig``: the CLI's teacher flags and the prepare config's ``reasoning:`` block
- ``run``     a teacher from its config, and a whole run (sources -> rows + rejects)
- ``progress`` the stderr line (rows/s, requests, tokens, errors)
- ``publish`` the output files: one writer each, staged, renamed into place at the end
- ``local_server`` ``transformers serve`` on 127.0.0.1 (the tests' and the benchmark's teacher)
- ``cli``     the subcommand
"""
