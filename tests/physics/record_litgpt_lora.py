"""Record, on the CPU, the live tensor bytes of LitGPT's LoRA finetune loop around its LM head and loss: the fixture
tests/physics/data/litgpt_lora.json, which tests/unit/test_litgpt_logits.py holds the engine's LitGPT moments to.

LitGPT and Lightning are not among the physics requirements; the recorder runs with LitGPT's own source at the commit
of the config-hub benchmarks (validation/measurements.csv, source S03) and the Lightning release it pinned:

    python3 -m venv /tmp/lgvenv && /tmp/lgvenv/bin/pip install torch==2.13.0 lightning==2.3.0 "setuptools<70" pyyaml
    git -C <litgpt clone> archive 5895df100 litgpt | tar -x -C /tmp/lg5895
    PYTHONPATH=/tmp/lg5895:$PWD /tmp/lgvenv/bin/python tests/physics/record_litgpt_lora.py

LitGPT pinned lightning==2.3.0.dev20240328 (pyproject.toml at 5895df100); the lines that matter here, Fabric's
output conversion (fabric/wrappers.py _FabricModule.forward, plugins/precision/half.py convert_output), read the same
at Lightning 2.2.0 and 2.3.0. The loop is litgpt/finetune/lora.py at 5895df100 (l.170-189 setup, l.274-286 the step)
run through Lightning Fabric (precision "bf16-true", one CPU device): `logits = model(input_ids,
lm_head_chunk_size=128)`, `logits[-1] = logits[-1][..., :-1, :]`, `loss = chunked_cross_entropy(logits,
targets[..., 1:])`, `fabric.backward(loss / accumulation)`, AdamW step and zero_grad on the window's last
micro-batch. Two optimizer steps, so that a micro-batch starts with the previous one's `logits` still held.
Full fine-tuning likewise with finetune/full.py's step (`measure(..., full=True)`). The model is litgpt.lora.GPT
(litgpt.model.GPT for full fine-tuning), Llama-shaped (RMSNorm, LLaMAMLP, grouped queries), LoRA on every linear it
offers, lora_dropout 0.05, with a vocabulary large next to the hidden size so that the logits dominate, as in the real
rows.

Recorded per case (bytes, every storage counted once, parameters and buffers included from the start), for the
first micro-batch of the second optimizer step (`it`, with the optimizer's states and the previous logits alive):
  pre_head:   live just before the LM head's first op (decoder and final norm saved, the previous logits held);
  held:       bytes of the previous micro-batch's `logits` (the list's storages), held until `logits = model(...)`;
  returned:   the high-water mark from the LM head's first op until the model's output is assigned;
  loss:       the high-water mark of chunked_cross_entropy's forward;
  backward:   the high-water mark of the backward;
  after_backward: live when the backward returns (the loop's `logits` still held, the LoRA gradients made);
  peak:       the whole run's high-water mark.
"""

from __future__ import annotations

import json
import pathlib
import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

FIXTURE = pathlib.Path(__file__).parent / "data" / "litgpt_lora.json"
S, V, H = 512, 8192, 256
MODEL = dict(n_layer=4, n_head=8, n_query_groups=2, n_embd=H, head_size=32, intermediate_size=688)
# The same model as a Hugging Face config.json (what the engine is handed as model_config)
HF_CONFIG = dict(model_type="llama", vocab_size=V, hidden_size=H, intermediate_size=688, num_hidden_layers=4,
                 num_attention_heads=8, num_key_value_heads=2, head_dim=32, max_position_embeddings=S,
                 tie_word_embeddings=False, rms_norm_eps=1e-5, hidden_act="silu")
LORA = dict(lora_r=8, lora_alpha=16, lora_dropout=0.05)
# (micro-batch size, gradient accumulation steps, LoRA on the head)
CASES = ((2, 1, True), (1, 1, True), (4, 1, True), (2, 1, False), (2, 2, True))
FULL_CASES = (2, 1)  # full fine-tuning (finetune/full.py), by micro-batch size


def key(batch: int, accumulation: int, head: bool) -> str:
    return f"b{batch}_acc{accumulation}_head{int(head)}"


class Live(TorchDispatchMode):
    """Bytes of live storages (weakrefs, each storage once), their high-water mark and the live bytes after each op."""

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, tuple[int, Any]] = {}
        self.cur = 0
        self.after: list[int] = []

    def add(self, t: Any) -> None:
        if not isinstance(t, torch.Tensor):
            return
        st = t.untyped_storage()
        k = id(st)
        if k in self.live:
            return
        n = st.nbytes()

        def _cb(_ref: Any, k: int = k, n: int = n) -> None:
            if self.live.pop(k, None) is not None:
                self.cur -= n

        self.live[k] = (n, weakref.ref(st, _cb))
        self.cur += n

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            self.add(t)
        self.after.append(self.cur)
        return out


def _storage_bytes(tensors: list[torch.Tensor]) -> int:
    return sum({id(t.untyped_storage()): t.untyped_storage().nbytes() for t in tensors}.values())


def measure(batch: int, accumulation: int, head: bool, full: bool = False) -> dict[str, int]:
    """One case; full: finetune/full.py at 5895df100 (l.129-138 setup, l.228-238 the step: `logits =
    model(input_ids)`, `loss = chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:])`, every weight trained)."""
    import lightning as L
    from litgpt.config import Config as FullConfig
    from litgpt.lora import GPT, Config, mark_only_lora_as_trainable
    from litgpt.model import GPT as FullGPT
    from litgpt.utils import chunked_cross_entropy

    torch.manual_seed(0)
    fabric = L.Fabric(accelerator="cpu", devices=1, precision="bf16-true")
    common: dict[str, Any] = dict(name="tiny", block_size=S, vocab_size=V, padded_vocab_size=V, rotary_percentage=1.0,
                                  parallel_residual=False, bias=False, norm_class_name="RMSNorm",
                                  mlp_class_name="LLaMAMLP", **MODEL)
    # the LoRA Config's mlp_class is LoRA's own MLP: full fine-tuning builds from the base Config (full.py l.19)
    with fabric.init_module(empty_init=False):
        model = FullGPT(FullConfig(**common)) if full else GPT(Config(
            **common, lora_query=True, lora_key=True, lora_value=True, lora_projection=True, lora_mlp=True,
            lora_head=head, **LORA))
    if not full:
        mark_only_lora_as_trainable(model)
    model = fabric.setup_module(model)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = fabric.setup_optimizers(torch.optim.AdamW(trainable, lr=2e-4, weight_decay=0.2, betas=(0.9, 0.95)))
    tr = Live()
    for t in [*model.parameters(), *model.buffers()]:
        tr.add(t)
    head_ops: list[int] = []

    def head_pre(_mod: Any, _args: Any) -> None:
        head_ops.append(len(tr.after))

    model.lm_head.register_forward_pre_hook(head_pre)
    gen = torch.Generator().manual_seed(1)
    marks: dict[str, int] = {}
    held: dict[int, int] = {}
    it = accumulation + 1  # the first micro-batch of the second optimizer step
    with tr:
        for iter_num in range(1, 2 * accumulation + 1):
            input_ids = torch.randint(0, V, (batch, S), generator=gen)
            targets = input_ids.clone()
            is_accumulating = iter_num % accumulation != 0
            marks[f"start{iter_num}"] = len(tr.after)
            with fabric.no_backward_sync(model, enabled=is_accumulating):
                logits = model(input_ids) if full else model(input_ids, lm_head_chunk_size=128)
                marks[f"returned{iter_num}"] = len(tr.after)
                if full:
                    loss = chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:])
                else:
                    logits[-1] = logits[-1][..., :-1, :]
                    loss = chunked_cross_entropy(logits, targets[..., 1:])
                marks[f"loss{iter_num}"] = len(tr.after)
                fabric.backward(loss / accumulation)
                marks[f"backward{iter_num}"] = len(tr.after)
            if not is_accumulating:
                optimizer.step()
                optimizer.zero_grad()
            held[iter_num] = _storage_bytes([logits] if full else logits)  # no other name may keep them
        a = tr.after
        first_head = next(i for i in head_ops if i >= marks[f"start{it}"])
        returned, loss_end, backward_end = marks[f"returned{it}"], marks[f"loss{it}"], marks[f"backward{it}"]
        return {
            "pre_head": a[first_head - 1],
            "held": held[it - 1],
            "returned": max(a[first_head:returned]),
            "loss": max(a[returned:loss_end]),
            "backward": max(a[loss_end:backward_end]),
            "after_backward": a[backward_end - 1],
            "peak": max(a),
        }


def main() -> None:
    torch.set_num_threads(2)
    import lightning

    cases = {key(*c): measure(*c) for c in CASES}
    cases.update({f"full_b{b}": measure(b, 1, True, full=True) for b in FULL_CASES})
    data = {"versions": {"torch": torch.__version__.split("+")[0], "lightning": lightning.__version__,
                         "litgpt": "5895df100 (litgpt/lora.py, finetune/lora.py, utils.py)"},
            "shape": {"S": S, "V": V, "H": H, "model": MODEL, "lora": LORA, "hf_config": HF_CONFIG,
                      "lm_head_chunk_size": 128},
            "cases": cases}
    FIXTURE.write_text(json.dumps(data, indent=1) + "\n")
    for k, v in cases.items():
        print(k, v)


if __name__ == "__main__":
    main()
