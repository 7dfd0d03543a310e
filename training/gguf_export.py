"""Write trained llama-architecture weights as a GGUF file that llama.cpp serves.

The source GGUF (the one the model was loaded from) gives everything but the weights: every metadata key and
value (architecture, hyper-parameters, the tokenizer, its chat template) is copied, and each of its tensors is
replaced by the trained tensor of the same name, in F32, F16 or Q8_0 (1-D tensors, the norms, stay F32 as llama.cpp
wants). Loading a llama GGUF, transformers renames ``blk.N.attn_q.weight`` to ``model.layers.N.self_attn.q_proj
.weight`` and so on and un-permutes the Q and K rows (llama.cpp stores them in its rotary order); here both are
inverted, with transformers' own name map, so that ``export(load(gguf)) == gguf`` up to the number format. A model
whose shape differs from the source's (a toy model with the source's tokenizer) gets the shape keys of its config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import numpy as np
from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor, get_gguf_hf_weights_map

__all__ = ["DTYPES", "export_gguf", "permute"]

DTYPES = {"f32": gguf.GGMLQuantizationType.F32, "f16": gguf.GGMLQuantizationType.F16,
          "q8_0": gguf.GGMLQuantizationType.Q8_0}
FILE_TYPE = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
             "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}
_INTERNAL = ("GGUF.version", "GGUF.tensor_count", "GGUF.kv_count", "general.architecture")


def permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's rotary order of Q or K rows (its converter's ``permute``; transformers applies the inverse)."""
    dim = weights.shape[0] // n_head // 2
    return weights.reshape(n_head, 2, dim, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def _value(field: Any) -> tuple[Any, gguf.GGUFValueType, gguf.GGUFValueType | None]:
    kind = field.types[0]
    if kind == gguf.GGUFValueType.ARRAY:
        return field.contents(), kind, field.types[-1]
    return field.contents(), kind, None


def _shape_keys(config: Any, arch: str) -> dict[str, int]:
    """The hyper-parameters a llama GGUF states, from a transformers config."""
    heads = config.num_attention_heads
    return {f"{arch}.block_count": config.num_hidden_layers, f"{arch}.embedding_length": config.hidden_size,
            f"{arch}.feed_forward_length": config.intermediate_size, f"{arch}.attention.head_count": heads,
            f"{arch}.attention.head_count_kv": config.num_key_value_heads,
            f"{arch}.rope.dimension_count": config.hidden_size // heads,
            f"{arch}.vocab_size": config.vocab_size}


def export_gguf(model: Any, source: str | Path, dest: str | Path, dtype: str = "f32") -> Path:
    """Write ``model`` (a transformers ``LlamaForCausalLM``) to ``dest`` with ``source``'s metadata and tokenizer.

    ``dtype``: ``f32`` (exact), ``f16`` or ``q8_0`` (llama.cpp's 8-bit blocks). Raises ValueError when the model
    is not a llama or a tensor of ``source`` has no counterpart in the model."""
    if dtype not in DTYPES:
        raise ValueError(f"export_gguf: dtype {dtype!r} is not one of {sorted(DTYPES)}")
    config = model.config
    if config.model_type != "llama":
        raise ValueError(f"export_gguf: a llama model was expected, got model_type {config.model_type!r}; only "
                         "llama-architecture GGUF files (SmolLM2) are written")
    reader = gguf.GGUFReader(str(source))
    arch = reader.fields["general.architecture"].contents()
    shape = _shape_keys(config, arch)
    names = get_gguf_hf_weights_map(model, LlamaTensorProcessor(config=config.to_dict()))
    state = {k: v.detach().to("cpu").float().numpy() for k, v in model.state_dict().items()}
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(dest), arch)
    for key, field in reader.fields.items():
        if key in _INTERNAL:
            continue
        value, kind, sub = _value(field)
        if key in shape:
            value = shape[key]
        elif key == "general.file_type":
            value = int(FILE_TYPE[dtype])
        writer.add_key_value(key, value, kind, sub_type=sub)
    blocks = config.num_hidden_layers
    for tensor in reader.tensors:
        if tensor.name.startswith("blk.") and int(tensor.name.split(".")[1]) >= blocks:
            continue  # a smaller model than the source's: its blocks end here
        hf = names.get(tensor.name)
        if hf is None or hf not in state:
            raise ValueError(f"export_gguf: the source's tensor {tensor.name!r} has no counterpart in the model "
                             f"(mapped to {hf!r}); is {source} the file this model was loaded from?")
        data = state[hf]
        if ".attn_q." in tensor.name:
            data = permute(data, config.num_attention_heads)
        elif ".attn_k." in tensor.name:
            data = permute(data, config.num_key_value_heads)
        number = DTYPES[dtype] if data.ndim > 1 else gguf.GGMLQuantizationType.F32
        if number == gguf.GGMLQuantizationType.Q8_0:
            data = gguf.quants.quantize(data.astype(np.float32), number)
        else:
            data = data.astype(np.float16 if number == gguf.GGMLQuantizationType.F16 else np.float32)
        writer.add_tensor(tensor.name, data, raw_dtype=number)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dest
