"""A teacher from a ``TeacherConfig``, and a whole run: sources -> filled rows + rejects.

>>> from beam_sft.convert.options import ConvertOptions
>>> cfg = TeacherConfig(base_url="http://127.0.0.1:9/v1", model="m", cache_dir="/tmp/beam-sft-doctest-cache")
>>> t = build_teacher(cfg, ConvertOptions(), ask=False)
>>> t.client is None, t.endpoint_host
(True, '127.0.0.1:9')
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from beam_sft.convert.options import ConvertOptions
from beam_sft.reason.cache import AnswerCache
from beam_sft.reason.client import Budget, TeacherClient, endpoint_host
from beam_sft.reason.config import TeacherConfig
from beam_sft.reason.fill import FillStats, Teacher
from beam_sft.reason.judge import Judge
from beam_sft.reason.prompt import Prompt


def build_teacher(config: TeacherConfig, options: ConvertOptions, *, ask: bool = True) -> Teacher:
    """``ask=False``: a teacher that only reads the cache (no client, no key read)."""
    client = None
    if ask:
        key = config.api_key()
        config.check_transport(key)  # before any request: a key over plain http to another host is refused
        client = TeacherClient(config.base_url, config.model, api_key=key, timeout=config.timeout,
                               retries=config.retries, backoff=config.backoff, concurrency=config.concurrency,
                               budget=Budget(config.max_requests, config.max_tokens_total),
                               max_response_bytes=config.response_bytes())
    return Teacher(prompt=Prompt.load(config.prompt), model=config.model, endpoint_host=endpoint_host(config.base_url),
                   cache=AnswerCache(config.resolved_cache_dir()), options=options, client=client,
                   params=config.params, max_chars=config.max_reasoning_chars,
                   max_response_bytes=config.response_bytes(), judge=build_judge(config, client))


def build_judge(config: TeacherConfig, client: TeacherClient | None) -> Judge | None:
    """The judge of ``--judge``: the teacher's own client when it is the same endpoint and model, else
    a client of its own that spends the same budget (one bound for every request of the run)."""
    j = config.judge
    if j is None:
        return None
    base_url, model = j.base_url or config.base_url, j.model or config.model
    judge_client = None
    if client is not None:
        if (base_url, model, j.api_key_env) == (config.base_url, config.model, None):
            judge_client = client
        else:
            key = config.judge_key()
            config.check_transport(key, base_url=base_url)  # the judge's key obeys the teacher's http rule
            judge_client = TeacherClient(base_url, model, api_key=key, timeout=config.timeout, retries=config.retries,
                                         backoff=config.backoff, concurrency=config.concurrency, budget=client.budget,
                                         max_response_bytes=config.response_bytes())
    return Judge(prompt=Judge.load_prompt(j.prompt), model=model, endpoint_host=endpoint_host(base_url),
                 client=judge_client, params=j.params)


def close_teacher(teacher: Teacher) -> None:
    """Close the teacher's client and the judge's, when it has its own."""
    if teacher.client is not None:
        teacher.client.close()
    if teacher.judge is not None and teacher.judge.client not in (None, teacher.client):
        teacher.judge.client.close()


def share_teacher(first: Teacher, config: TeacherConfig, options: ConvertOptions) -> Teacher:
    """A teacher for another source (its own convert options) that spends ``first``'s client, budget,
    stats, refusals and judge: one bound for every request of the run."""
    teacher = build_teacher(config, options, ask=False)
    teacher.client, teacher.stats, teacher.refusals = first.client, first.stats, first.refusals
    teacher.judge = first.judge
    return teacher


@contextlib.contextmanager
def teacher_session(config: TeacherConfig, options: ConvertOptions, *, quiet: bool = True,
                    interval: float | None = None) -> Iterator[Teacher]:
    """The one set-up and tear-down of a teacher pass (``reason`` and prepare's ``reasoning:``): the
    asking teacher, its progress line while the pass runs, its clients closed however the pass ends."""
    from beam_sft.reason.progress import progress

    teacher = build_teacher(config, options)
    try:
        with progress(teacher.stats, teacher.client.budget, quiet=quiet, interval=interval):
            yield teacher
    except BaseException:  # Ctrl-C or an error: requests in flight and retry waits end now
        abort_teacher(teacher)
        raise
    finally:
        close_teacher(teacher)


def abort_teacher(teacher: Teacher) -> None:
    for client in {id(c): c for c in (teacher.client, teacher.judge.client if teacher.judge else None)
                   if c is not None}.values():
        client.abort()


@dataclass
class ReasonRun:
    report: object  # beam_sft.convert.pipeline.ConvertReport
    stats: FillStats
    budget: Budget
    damaged: int = 0  # cache entries of the wrong shape, asked again


def reason_files(paths: Iterable[str | Path], config: TeacherConfig, *, options: ConvertOptions,
                 format: str = "auto", output: str | Path | None = None, rejects: str | Path | None = None,
                 quiet: bool = True, on_source=None, progress_interval: float | None = None) -> ReasonRun:
    """Convert ``paths`` as ``convert`` does, the teacher filling missing reasoning on the way."""
    from beam_sft.convert.pipeline import convert_files

    with teacher_session(config, options, quiet=quiet, interval=progress_interval) as teacher:
        stats = teacher.stats
        report = convert_files(paths, format=format, options=options, output=output, rejects=rejects,
                               on_source=on_source, fill=teacher, workers=config.concurrency,
                               on_row=lambda _: stats.add(rows=1))
    return ReasonRun(report, stats, teacher.client.budget, teacher.cache.damaged)
