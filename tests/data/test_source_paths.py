"""A source path that names nothing: an empty one is refused (it would read the working folder, found in
a review reading earlier outputs and a tokenizer.json as data), and a URL's credentials never reach the
message that says it is missing. A mix weight past MAX_WEIGHT is refused with its key path."""

from __future__ import annotations

import pytest

from beam_sft.cli import main
from beam_sft.config_utils import from_dict
from beam_sft.errors import BeamError, ConfigError
from beam_sft.prepare.config import MAX_WEIGHT, PrepareConfig


@pytest.mark.parametrize("path", ["", "  "])
def test_an_empty_source_path_is_refused_everywhere(path, tmp_path, monkeypatch, capsys):
    (tmp_path / "earlier.jsonl").write_text('{"messages": []}\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        from_dict(PrepareConfig, {"sources": [{"path": "a.jsonl"}, {"path": path}]})
    assert info.value.path == "sources[1].path"
    assert main(["convert", path, "-o", str(tmp_path / "out.jsonl")]) == 2
    assert "a source path is empty" in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()
    from beam_sft.data.sources import expand_source, iter_located

    for call in (lambda: expand_source(path), lambda: list(iter_located(path))):
        with pytest.raises(BeamError, match="empty"):
            call()


@pytest.mark.parametrize("url", ["https://alice:SECRETPASS@h.example/x.jsonl", "s3://k?token=SECRETPASS/x.jsonl"])
def test_a_missing_source_named_by_a_url_is_said_without_its_credentials(url, tmp_path, capsys):
    assert main(["convert", url, "-o", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "no such file or directory" in err and "SECRETPASS" not in err


@pytest.mark.parametrize("weight", [MAX_WEIGHT + 1, 1e300])
def test_a_weight_past_the_bound_is_refused_with_its_path(weight):
    with pytest.raises(ConfigError) as info:
        from_dict(PrepareConfig, {"sources": [{"path": "a.jsonl", "weight": weight}]})
    assert info.value.path == "sources[0].weight"
    assert from_dict(PrepareConfig, {"sources": [{"path": "a.jsonl", "weight": MAX_WEIGHT}]}).sources[0].weight == MAX_WEIGHT


@pytest.mark.parametrize(("section", "key"), [({"output": ""}, "output"), ({"tokenizer": "  "}, "tokenizer")])
def test_an_empty_output_or_tokenizer_is_said_not_taken_for_its_default(section, key):
    with pytest.raises(ConfigError) as info:
        from_dict(PrepareConfig, {"sources": [{"path": "a.jsonl"}], **section})
    assert info.value.path == key


@pytest.mark.parametrize("block", [{"api_key_env": ""}, {"model": "   "}, {"judge": {"api_key_env": " "}}])
def test_an_empty_teacher_key_variable_or_model_is_refused(block):
    from beam_sft.reason.config import TeacherConfig

    with pytest.raises(ConfigError):
        from_dict(TeacherConfig, {"base_url": "http://127.0.0.1:1/v1", "model": "m", **block})


@pytest.mark.parametrize(("recipe", "key"), [
    ({"data": {"prepared": ""}}, "data.prepared"),
    ({"data": {"prepared": "out/prep", "eval": {"prepared": "  "}}}, "data.eval.prepared"),
    ({"data": {"prepared": "out/prep"}, "sft": {"resume_from_checkpoint": ""}}, "sft.resume_from_checkpoint"),
    ({"data": {"prepared": "out/prep"}, "sft": {"deepspeed": ""}}, "sft.deepspeed"),
    ({"data": {"prepare": {"sources": [{"path": "a.jsonl", "batch_input": ""}]}}}, "data.prepare.sources[0].batch_input"),
    ({"data": {"prepare": {"sources": [{"path": "a.jsonl"}], "reasoning": {
        "base_url": "http://127.0.0.1:1/v1", "model": "m", "cache_dir": ""}}}}, "data.prepare.reasoning.cache_dir"),
    ({"data": {"prepare": {"sources": [{"path": "a.jsonl"}], "reasoning": {
        "base_url": "http://127.0.0.1:1/v1", "model": "m", "judge": {"prompt": " "}}}}},
     "data.prepare.reasoning.judge.prompt"),
])
def test_an_empty_path_in_a_recipe_is_refused_with_its_key_not_taken_for_the_working_folder(recipe, key):
    # `data.prepared: ''` was Path(''), the working folder: train would look for a prepared folder there;
    # an empty cache_dir or prompt was "not given", and a default put in its place unsaid
    from beam_sft.train.recipe import recipe_from_dict

    with pytest.raises(ConfigError) as info:
        recipe_from_dict({"model": {"path": "m"}, **recipe})
    assert info.value.path == key and "empty path" in str(info.value), str(info.value)
