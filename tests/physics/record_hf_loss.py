"""Record what a transformers release's causal-LM head and loss hold alive on the CPU (the fixture
tests/physics/data/hf_loss.json that tests/physics/test_hf_loss_releases.py holds the engine to).

Older releases cannot share the project's environment (they pin older tokenizers / huggingface_hub), so each is
installed into a folder of its own and run with the project's torch:

    pip install --no-deps --target /tmp/tf4382 transformers==4.38.2 tokenizers==0.15.2 huggingface_hub==0.23.4
    PYTHONPATH=/tmp/tf4382:$PWD python tests/physics/record_hf_loss.py

It adds (or replaces) the release's entry: for a tiny Llama and a tiny Mistral (one layer, every weight frozen
but the final norm's, so backward runs the head and the loss only), the live bytes of
  trainer: a Trainer step (autocast bf16, accelerate's convert_to_fp32 on the outputs, outputs dropped after the
           loss, then backward);
  custom:  a plain loop over the bf16 model without autocast that keeps `out` through backward;
each as fwd (peak from lm_head's input to the forward's return), bwd (peak of backward), both above the live bytes
when lm_head is called, and held (live after backward above the live bytes before the forward).
"""

from __future__ import annotations

import gc
import json
import pathlib
import sys
import warnings

import torch

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import harness
import transformers

FIXTURE = pathlib.Path(__file__).parent / "data" / "hf_loss.json"
B, S, H, V = 2, 512, 32, 8192
CONFIGS = {
    "llama": dict(model_type="llama", vocab_size=V, hidden_size=H, intermediate_size=64, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=S, tie_word_embeddings=False),
    "mistral": dict(model_type="mistral", vocab_size=V, hidden_size=H, intermediate_size=64, num_hidden_layers=1,
                    num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=S,
                    tie_word_embeddings=False, sliding_window=None),
}


def measure(style: str, loop: str) -> dict[str, int]:
    torch.manual_seed(0)
    conf = {k: v for k, v in CONFIGS[style].items() if k != "model_type"}
    cls = transformers.LlamaConfig if style == "llama" else transformers.MistralConfig
    m = transformers.AutoModelForCausalLM.from_config(cls(**conf)).to(torch.bfloat16)
    for p in m.parameters():
        p.requires_grad_(False)
    m.model.norm.weight.requires_grad_(True)
    ids = torch.randint(0, V, (B, S))
    tr = harness.LiveMem()
    for t in [*m.parameters(), *m.buffers(), ids]:
        tr.add(t)
    mark: dict[str, int] = {}

    def at_head(_mod, _inp):
        mark["head"] = tr.cur
        tr.peak = tr.cur

    m.lm_head.register_forward_pre_hook(at_head)
    trainer = loop == "trainer"
    gc.collect()
    start = tr.cur
    with tr:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=trainer):
            out = m(input_ids=ids, labels=ids, use_cache=False)
            if trainer:
                from accelerate.utils import convert_to_fp32

                out = convert_to_fp32(out)
        fwd = tr.peak - mark["head"]
        loss = out.loss
        if trainer:
            del out
        gc.collect()
        tr.peak = tr.cur
        loss.backward()
        bwd = tr.peak - mark["head"]
        del loss
        gc.collect()
        grads = sum(p.grad.numel() * p.grad.element_size() for p in m.parameters() if p.grad is not None)
        held = tr.cur - start - grads
    return {"fwd": fwd, "bwd": bwd, "held": held}


def main() -> None:
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        entry = {style: {loop: measure(style, loop) for loop in ("trainer", "custom")} for style in CONFIGS}
    data = json.loads(FIXTURE.read_text()) if FIXTURE.exists() else {}
    data["shape"] = {"B": B, "S": S, "H": H, "V": V, "configs": CONFIGS}
    data.setdefault("releases", {})[transformers.__version__] = entry
    data["releases"] = dict(sorted(data["releases"].items(), key=lambda kv: [int(x) for x in kv[0].split(".")]))
    FIXTURE.write_text(json.dumps(data, indent=1) + "\n")
    print(transformers.__version__, json.dumps(entry))


if __name__ == "__main__":
    main()
