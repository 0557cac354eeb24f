"""``beam-sft prepare --engine ray``: the shards of one prepare as Ray tasks, merged once by the driver.

Ray gives scheduling, retries and data movement, not exactly-once output (a task can run twice),
so the guarantees stay ours, the same as for a SLURM job array:

1. The driver plans the shards (``shard_plan``: contiguous record ranges, source and row range ->
   shard id) from the record counts alone; the plan goes into the log and the report's ``engine``.
2. One Ray task per shard runs the same sharded ``prepare`` as ``--num-shards/--shard-index`` into
   its own folder ``.NAME.ray-shards/shard-I`` beside the output: staged, verified, sealed and
   published there by one rename (``pipeline.prepare``, its lock and its output guard). A task that
   runs again, on a retry or a second time, finds its sealed folder and reuses it (its cache hit);
   a dead attempt's staging folder and lock are cleared by the next attempt.
3. A driver started again reuses every shard folder already sealed for this plan and submits only
   the rest. Another run's shard folder (another fingerprint) is prepared again over, through
   prepare's output guard; a folder of this run that is not what it sealed (a file whose digest
   differs, another row range) is refused, with its path: never merged.
4. Only when every shard is sealed and checked, the driver merges them once (``shards``: the merge of
   ``merge-shards``, every seal and digest checked again) into a staging folder, verifies it, writes
   the report (the manifest: every file's digest) last and publishes it by one rename. The merged
   folder is the folder ``--engine local`` writes for the same config (same fingerprint too).

Every attempt of a shard appends a line to ``.NAME.ray-shards/attempts/shard-I.jsonl`` (start, and
its end: sealed, raised or refused), each naming the driver run that submitted it; the driver reads
its own run's lines to say which shard was retried and why (a start without an end is a worker that
died). An earlier driver's attempts stay in the file and count for nothing. Only a transient failure
is retried: a refusal that would be the same on every attempt (a ``ConfigError``, an
``OutputRefused``, ...) ends the shard at its first attempt. The shard folders must be on a file
system every node sees (as for SLURM); the output folder is written by the driver, and the shards'
folder goes after the publish only by our removal rule (ours, holding nothing a run of ours does not
write).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import shutil
import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from beam_sft.dataset_folder import owner
from beam_sft.dataset_folder import report_json as rep
from beam_sft.errors import (
    ConfigError,
    NothingKept,
    OutputRefused,
    PreparedError,
    RunStopped,
    TokenizerError,
    VerificationError,
)
from beam_sft.prepare import cache, shard_plan
from beam_sft.prepare.config import PrepareConfig

logger = logging.getLogger("beam_sft.prepare")

MISSING_RAY = "--engine ray needs Ray, which is not installed: pip install 'beam-sft[ray]'"
# Ray's own retries: a worker that dies and a shard that raises are each tried again this often.
MAX_RETRIES = 2
# What a shard's prepare raises on purpose when its inputs, not its attempt, are at fault: another
# attempt reads the same config, data and folders and would refuse the same way, so the shard ends at
# once (returned, not raised, so that Ray's retries do not run it again). Not among them: a lock held
# by a live attempt (OutputLocked), a full or flaky file system (OutputUnwritable, OSError), a worker
# that died, anything unforeseen: those may pass, and are retried.
DETERMINISTIC = (ConfigError, OutputRefused, PreparedError, VerificationError, NothingKept, TokenizerError,
                 RunStopped)
# How long the driver waits for a named cluster's address to take a connection before it says so
# (ray.init itself retries an address that refuses for many minutes).
CONNECT_TIMEOUT_S = 10.0


def import_ray():
    """The ``ray`` module, or one line naming the extra that installs it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("engine", MISSING_RAY) from exc
    return ray


def shards_root(final: Path) -> Path:
    """Where the shard folders of ``final`` are prepared (beside it, hidden, removed after the publish)."""
    return final.parent / f".{final.name}.ray-shards"


def _attempts_file(root: Path, index: int) -> Path:
    return root / "attempts" / f"shard-{index}.jsonl"


def _note(path: Path, **entry) -> None:
    """One line of a shard's attempts file (appended: attempts on other nodes add theirs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({**entry, "pid": os.getpid(), "host": socket.gethostname(), "time": round(time.time(), 3)})
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def run_shard(config: PrepareConfig, attempts: str, run: str | None = None) -> dict:
    """The body of one shard's Ray task: the sharded ``prepare``, its attempt noted before and after
    under ``run`` (the driver run that submitted it). A deterministic refusal (``DETERMINISTIC``) is
    returned as ``{"refused": error}``: raising it would have Ray run the same refusal again."""
    from beam_sft.prepare.pipeline import prepare

    path = Path(attempts)
    _note(path, shard=config.shard_index, event="start", run=run)
    try:
        out = prepare(config)
    except DETERMINISTIC as exc:
        _note(path, shard=config.shard_index, event="refused", run=run, error=f"{type(exc).__name__}: {exc}")
        return {"shard": config.shard_index, "refused": exc}
    except BaseException as exc:
        _note(path, shard=config.shard_index, event="raised", run=run, error=f"{type(exc).__name__}: {exc}")
        raise
    report = rep.require_report(out)
    _note(path, shard=config.shard_index, event="sealed", run=run, fingerprint=report["fingerprint"])
    return {"shard": config.shard_index, "path": str(out), "fingerprint": report["fingerprint"]}


def read_attempts(path: Path, run: str | None = None) -> list[dict]:
    """A shard's attempts, each ``{"start": entry, "end": entry | None}``, in order; with ``run``, only
    that driver run's (the file keeps every run's: an earlier driver's retries are not this run's)."""
    attempts: list[dict] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return attempts
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut off by a kill mid-write
        if not isinstance(entry, dict) or (run is not None and entry.get("run") != run):
            continue  # another driver run's attempt (or its task, still running): not this run's
        if entry.get("event") == "start":
            attempts.append({"start": entry, "end": None})
        elif attempts and attempts[-1]["end"] is None:
            attempts[-1]["end"] = entry
    return attempts


def retries(attempts: list[dict]) -> list[str]:
    """Why each attempt but the last ended without a sealed shard, in words.

    >>> retries([{"start": {"pid": 7, "host": "n1"}, "end": None}, {"start": {"pid": 9, "host": "n1"},
    ...          "end": {"event": "sealed"}}])
    ['attempt 1 (pid 7 on n1) ended without a result: its worker died (killed, or its node was lost)']
    """
    out = []
    for number, attempt in enumerate(attempts[:-1], 1):
        start, end = attempt["start"], attempt["end"]
        where = f"attempt {number} (pid {start.get('pid')} on {start.get('host')})"
        if end is None:
            out.append(f"{where} ended without a result: its worker died (killed, or its node was lost)")
        elif end.get("event") in ("raised", "refused"):
            out.append(f"{where} {end.get('event')} {end.get('error')}")
        else:
            out.append(f"{where} sealed the shard and ran again")
    return out


@dataclasses.dataclass(frozen=True)
class Plan:
    """The driver's plan: where each shard goes and what it must hold."""

    final: Path
    root: Path
    fingerprint: str  # the unsharded run's (the merged folder's)
    parts: dict
    shards: list[dict]  # shard_plan.plan entries
    labels: list[str]

    def folder(self, index: int) -> Path:
        return self.root / f"shard-{index}"

    def shard_fingerprint(self, index: int) -> str:
        parts = {**self.parts, "options": {**self.parts["options"], "num_shards": len(self.shards)},
                 "shard_index": index}
        return cache.combined(parts)[0]


def sealed_shard(plan: Plan, index: int) -> bool:
    """Whether shard ``index``'s folder is a sealed shard of this plan (reuse it); False when there is
    none yet, or the folder there is another run's (another fingerprint: an earlier config or shard
    count), which the shard's prepare then replaces as it replaces any older result of ours (its
    output guard refuses a folder that is not ours). A folder of this run's fingerprint that is not
    what it sealed (a changed file, another row range) raises, naming it: it is never merged."""
    from beam_sft.dataset_folder.integrity import check_integrity
    from beam_sft.dataset_folder.load import check_counts

    folder = plan.folder(index)
    report = rep.read_report(folder)
    if report is None:
        return False  # nothing sealed there (a dead attempt's staging beside it is prepare's to clear)
    if report.get("fingerprint") != plan.shard_fingerprint(index):
        logger.info("ray: shard %d: %s is another run's (another fingerprint): prepared again", index, folder)
        return False
    check_integrity(folder, report)  # the seal, then every file's digest
    check_counts(folder, report)
    read = {name: entry["read"] for name, entry in report["sources"].items()}
    planned = {label: 0 for label in plan.labels}
    for entry in plan.shards[index]["sources"]:
        planned[entry["source"]] = entry["rows"][1] - entry["rows"][0]
    if read != planned:
        raise PreparedError(folder, f"holds {read} records per source, the plan gives shard {index} {planned}")
    return True


def cluster_address(address: str | None, env: dict) -> tuple[str, str] | None:
    """The cluster ``ray.init(address)`` connects to, as Ray picks it (``$RAY_ADDRESS`` when no address
    or ``auto`` is given), with where it came from (``ray_address`` or ``RAY_ADDRESS``, for the error);
    None for a local cluster of this process, or ``auto`` (Ray finds the one ``ray start`` recorded).

    >>> cluster_address("h:6379", {"RAY_ADDRESS": "x:1"}), cluster_address(None, {"RAY_ADDRESS": "x:1"})
    (('h:6379', 'ray_address'), ('x:1', 'RAY_ADDRESS'))
    >>> cluster_address(None, {}), cluster_address("auto", {}), cluster_address("local", {})
    (None, None, None)
    """
    origin = "ray_address"
    if address in (None, "auto") and env.get("RAY_ADDRESS"):
        address, origin = env["RAY_ADDRESS"], "RAY_ADDRESS"
    if address in (None, "", "auto", "local"):
        return None
    return address, origin


def host_port(address: str) -> tuple[str, int] | None:
    """The host and port of ``HOST:PORT`` (``ray://HOST:PORT``, ``[V6]:PORT``); None for any other form,
    which ``ray.init`` then judges itself.

    >>> host_port("10.0.0.7:6379"), host_port("ray://head:10001"), host_port("[::1]:6379"), host_port("head")
    (('10.0.0.7', 6379), ('head', 10001), ('::1', 6379), None)
    """
    text = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def check_answers(address: str, origin: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse, in one line naming it, a cluster address where nothing takes a TCP connection within
    ``timeout`` s: ``ray.init`` would retry it for many minutes (and hold SIGINT/SIGTERM meanwhile)."""
    target = host_port(address)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=timeout):
            pass
    except OSError as exc:
        why = f"no answer within {timeout:g} s" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ConfigError(origin, f"no Ray cluster answers at {address} ({why}): start it (`ray start --head "
                                  f"--port {target[1]}` on {target[0]}) or give the address of one") from None


def _start_ray(ray, address: str | None) -> bool:
    """Connect to (or start) a cluster; True when this call started the connection (ours to end)."""
    if ray.is_initialized():  # a caller (a test, a notebook) connected already
        return False
    kwargs: dict = {"log_to_driver": False}
    named = cluster_address(address, os.environ)
    if address is None and not os.environ.get("RAY_ADDRESS"):
        kwargs["include_dashboard"] = False  # a local cluster of this process: no dashboard to serve
    if named is not None:
        check_answers(*named)
    try:
        ray.init(address=address, **kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        if named is None:
            raise  # starting a local cluster failed: Ray's own words, whole
        text = str(exc).strip().splitlines()
        raise ConfigError(named[1], f"cannot connect to the Ray cluster at {named[0]}: "
                                    f"{type(exc).__name__}: {text[0] if text else ''}") from exc
    return True


def prepare_on_ray(config: PrepareConfig, *, address: str | None = None, shards: int | None = None,
                   task: Callable[[PrepareConfig, str, str], dict] = run_shard) -> Path:
    """Prepare ``config`` as ``shards`` Ray tasks (default: one per CPU of the cluster, at most one per
    record) and merge them; returns the published folder. ``task`` is the body of each shard's task
    (``run_shard``; the fault tests wrap it)."""
    ray = import_ray()  # first: a cluster without the extra says so before any work
    if config.num_shards != 1 or config.shard_index != 0:
        raise ConfigError("num_shards", "--engine ray plans the shards itself: give --shards N, not "
                                        "--num-shards/--shard-index")
    from beam_sft.dataset_folder.lock import output_lock
    from beam_sft.prepare import pipeline
    from beam_sft.prepare.resolved import resolve

    if not config.sources:
        raise ConfigError("sources", "no data sources given")
    if config.output:
        from beam_sft.paths import check_paths

        check_paths({"sources": [s.path for s in config.sources], "tokenizer": config.tokenizer},
                    {"output": config.output})
    loaded = pipeline.load_run_tokenizer(config.tokenizer)
    resolved = resolve(config, loaded.tokenizer)
    fingerprint, _, parts = cache.fingerprints(resolved, loaded.tokenizer)
    final = Path(config.output) if config.output else cache.default_output(fingerprint)
    from beam_sft.dataset_folder import output

    output.check_output_target(final)
    if config.cache and cache.is_cached(final, fingerprint):
        return pipeline.prepare(dataclasses.replace(config, output=str(final)))  # its cache hit, checked
    started = _start_ray(ray, address)
    try:
        count = shards or max(1, int(ray.cluster_resources().get("CPU", 1)))
        counts = shard_plan.source_counts(resolved)
        count = max(1, min(count, sum(counts)))  # no shard without a record
        labels = [s.spec.label for s in resolved.sources]
        plan = Plan(final, shards_root(final.absolute()), fingerprint, parts, shard_plan.plan(labels, counts, count), labels)
        with output_lock(final):  # one driver per output folder
            return _run(ray, config, plan, task, address, loaded)
    finally:
        if started:
            ray.shutdown()


def _make_root(root: Path) -> None:
    if root.exists() or root.is_symlink():
        if not owner.is_ours(root):
            raise OutputRefused(root, "it is in the way of the Ray shards of this output and is not ours; move it "
                                      "away", hint=False)
        return  # an earlier driver's: its sealed shards are reused
    root.mkdir(parents=True)
    owner.write_marker(root)


_SHARD_DIR = re.compile(r"shard-\d+|\.shard-\d+\.(staging|old)-\d+")
_SHARD_LOCK = re.compile(r"\.shard-\d+\.lock")
_ATTEMPTS_FILE = re.compile(r"shard-\d+\.jsonl")


def unexplained_shards(root: Path) -> list[str]:
    """Every entry of the shards' folder ``root`` that no run of ours writes there: ours are the marker,
    ``attempts/shard-I.jsonl``, the shards' locks, and shard folders (sealed, staging or old) that are
    ours and hold nothing else (``output.unexplained``). Empty means removing ``root`` can only remove
    what our runs wrote."""
    from beam_sft.dataset_folder import output

    out = []
    for entry in sorted(root.iterdir()):
        name, link = entry.name, entry.is_symlink()
        if not link and entry.is_file() and (name == owner.MARKER or _SHARD_LOCK.fullmatch(name)):
            continue
        if not link and entry.is_dir() and name == "attempts":
            out += [f"attempts/{f.name}" + ("/" if f.is_dir() and not f.is_symlink() else "")
                    for f in sorted(entry.iterdir())
                    if f.is_symlink() or not f.is_file() or not _ATTEMPTS_FILE.fullmatch(f.name)]
        elif not link and entry.is_dir() and _SHARD_DIR.fullmatch(name):
            out += [f"{name}/{extra}" for extra in output.unexplained(entry)] if owner.is_ours(entry) else [f"{name}/"]
        else:
            out.append(name + ("/" if entry.is_dir() and not link else ""))
    return out


def remove_shards_root(root: Path) -> bool:
    """Remove the shards' folder after the publish, by the rule every removal of ours follows
    (``output.remove_ours``): only when it holds our marker and nothing a run of ours does not write;
    else it stays, said in a warning naming what it holds. Returns whether it was removed."""
    if not owner.is_ours(root):
        logger.warning("left %s (the Ray shards' folder): it holds no %s marker, so it is not ours to remove",
                       root, owner.MARKER)
        return False
    extra = unexplained_shards(root)
    if extra:
        shown = ", ".join(extra[:5]) + (f" and {len(extra) - 5} more" if len(extra) > 5 else "")
        logger.warning("left %s (the Ray shards' folder): it also holds %s, which no run of ours wrote; remove "
                       "it yourself once that is saved", root, shown)
        return False
    shutil.rmtree(root, ignore_errors=True)
    return True


def _run(ray, config: PrepareConfig, plan: Plan, task, address: str | None, loaded) -> Path:
    from beam_sft.prepare.shards import merge_checked_shards

    _make_root(plan.root)
    procs = config.num_proc or 1
    for entry in plan.shards:
        ranges = ", ".join(f"{s['source']} rows {s['rows'][0]}-{s['rows'][1] - 1}" for s in entry["sources"])
        logger.info("ray: shard %d of %d: %s", entry["shard"], len(plan.shards), ranges)
    reused = [i for i in range(len(plan.shards)) if sealed_shard(plan, i)]
    for index in reused:
        logger.info("ray: shard %d: sealed by an earlier run, reused (not recomputed)", index)
    remote = ray.remote(task)
    run = uuid.uuid4().hex  # this driver run: its attempts are told from an earlier run's by it
    pending = {}
    for index in range(len(plan.shards)):
        if index in reused:
            continue
        shard_config = dataclasses.replace(config, num_shards=len(plan.shards), shard_index=index,
                                           output=str(plan.folder(index)), num_proc=procs)
        ref = remote.options(name=f"beam-sft-prepare-shard-{index}", num_cpus=procs, max_retries=MAX_RETRIES,
                             retry_exceptions=True).remote(shard_config, str(_attempts_file(plan.root, index)), run)
        pending[ref] = index
    failed = {}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        index = pending.pop(done[0])
        try:
            result = ray.get(done[0])
        except Exception as exc:  # noqa: BLE001 (Ray's retries are spent: the shard failed; say which and why)
            failed[index] = _cause(exc)
            continue
        if "refused" in result:  # a deterministic refusal: not retried (DETERMINISTIC)
            failed[index] = _cause(result["refused"])
            continue
        logger.info("ray: shard %d sealed: %s", index, result["path"])
    history = {i: read_attempts(_attempts_file(plan.root, i), run) for i in range(len(plan.shards))}
    retried = []
    for index, attempts in history.items():
        for why in retries(attempts):
            logger.warning("ray: shard %d retried: %s", index, why)
            retried.append({"shard": index, "why": why})
    if failed:
        index = min(failed)
        raise PreparedError(plan.final, f"shard {index} of {len(plan.shards)} failed after {len(history[index])} attempt(s): "
                            f"{failed[index]}; nothing was published (the sealed shards stay in {plan.root} "
                            "for the next run)")
    for index in range(len(plan.shards)):  # every shard's seal, digests, fingerprint and range, then merge
        if not sealed_shard(plan, index):
            raise PreparedError(plan.folder(index), f"shard {index} reported done but is not sealed there")
    engine = {"name": "ray", "address": address or os.environ.get("RAY_ADDRESS") or "local", "count": len(plan.shards),
              "plan": plan.shards, "reused": reused, "retried": retried,
              "attempts": {str(i): len(a) for i, a in history.items()}}
    out = merge_checked_shards([plan.folder(i) for i in range(len(plan.shards))], plan.final, verify=config.verify,
                               num_proc=config.resolved_num_proc(), engine=engine, config=dataclasses.asdict(config),
                               loaded=loaded)
    remove_shards_root(plan.root)  # published: the shards are done (a user's file among them stays)
    return out


def _cause(exc: BaseException) -> str:
    """The first line of what ended a shard: the shard's own exception, not Ray's wrapping of it."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        exc = cause
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
