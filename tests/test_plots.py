"""The report plot: three panels, the channel shares drawn as they are in the report."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("matplotlib")

from beam_sft.plots import PLOT_FILE, channel_fractions, plot_prepared, report_figure, write_report_plot  # noqa: E402

CHANNELS = {"analysis": {"tokens": 300, "fraction_of_trained": 0.3}, "final": {"tokens": 600, "fraction_of_trained": 0.6},
            "other": {"tokens": 100, "fraction_of_trained": 0.1}}


def test_figure_has_lengths_fractions_and_channels():
    fig = report_figure([10, 20, 20, 400], [0.1, 0.5, 0.5, 0.9], CHANNELS, max_length=512)
    lengths, fractions, channels = fig.axes
    assert "row length (4 rows)" == lengths.get_title()
    assert sum(p.get_height() for p in lengths.patches) == 4
    assert sum(p.get_height() for p in fractions.patches) == 4
    assert [round(p.get_height(), 6) for p in channels.patches] == [0.3, 0.6, 0.1]
    assert [t.get_text() for t in channels.get_xticklabels()] == ["analysis", "final", "other"]
    assert any("max_length 512" in t.get_text() for t in lengths.get_legend().get_texts())


def test_channel_fractions_from_counts_when_fractions_are_absent():
    assert channel_fractions({"analysis": 1, "final": 3}) == {"analysis": 0.25, "final": 0.75}
    assert channel_fractions(None) == {}


def test_written_beside_report_of_a_prepared_folder(tmp_path, fixture_dir):
    from beam_sft.config_utils import from_dict
    from beam_sft.prepare import PrepareConfig, prepare

    samples = "beam_sft/data/samples"
    config = from_dict(PrepareConfig, {"sources": [{"path": f"{samples}/chat_openai.jsonl", "format": "openai"}],
                                       "tokenizer": str(fixture_dir), "output": str(tmp_path / "prep"),
                                       "num_proc": 1})
    out = prepare(config)
    target = tmp_path / "plots"
    target.mkdir()
    path = plot_prepared(out, out=target)
    assert path == target / PLOT_FILE
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "report.json").read_text())["verify"]["trained_by_channel"]
    again = write_report_plot(tmp_path, [5, 6], [0.5, 0.5])
    assert again.is_file()
