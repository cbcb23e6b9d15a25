"""Record, on the CPU, the allocation order of one gradient-checkpointed decoder layer: the fixture
tests/physics/data/ckpt_forward.json, whose `recompute_kept` tests/unit/test_ckpt_recompute.py holds the engine's
recomputation in backward to (the timeline's layer-backward moment and the allocator replay's recompute).

    PYTHONPATH=$PWD python tests/physics/record_ckpt_forward.py

Under gradient checkpointing a decoder layer's forward keeps nothing for backward: reentrant
(torch.utils.checkpoint CheckpointFunction.forward runs the layer under torch.no_grad()) or non-reentrant
(its saved-tensor hooks pack a holder instead of the tensor), so each intermediate is freed after its last use.
For tiny models built from config dicts (harness.MODEL_CONFIGS plus an MHA Mistral), with and without LoRA,
bf16 (autocast, bf16 weights), fp32 (no autocast) and fp32 weights under bf16 autocast, SDPA and eager, and the
two Hugging Face checkpointing paths (gradient_checkpointing_enable(use_reentrant=True / False)), it records for
layer 1 (a middle layer):
  forward:   every storage its forward's dispatched ops create, in order, from the layer's forward pre-hook to the
             next layer's: a size > 0 allocates the next block (numbered from 0), ~k frees block k;
  ops:       the op that made each block (for the reader);
  out:       the block that is the layer's output (the next layer's kept input); blocks left live besides it are
             autocast's cached casts of trainable fp32 weights, cleared when the autocast region exits;
  recompute: the same for the layer's recomputation in backward, from its second forward pre-hook to its second
             forward hook (non-reentrant recorded with set_checkpoint_early_stop(False), so that it runs to the
             layer's end; early stop only skips ops after the last saved tensor), and `kept`: the bytes its blocks
             still hold there less the output: the saved tensors (and the casts autocast made for them).
"""

from __future__ import annotations

import contextlib
import gc
import json
import pathlib
import sys
import warnings
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import harness
import transformers

FIXTURE = pathlib.Path(__file__).parent / "data" / "ckpt_forward.json"
LAYER = 1
CONFIGS = {style: harness.MODEL_CONFIGS[style] for style in ("llama", "qwen2", "qwen3", "gemma")}
# Mistral with as many kv heads as heads: the branches without repeat_kv's copies
CONFIGS["mistral"] = dict(model_type="mistral", **{**harness._COMMON, "num_key_value_heads": 8}, head_dim=32,
                          hidden_act="silu", rms_norm_eps=1e-5, tie_word_embeddings=False, sliding_window=None)
# precision: (weights' dtype, autocast bf16)
PRECISIONS = {"bf16": (torch.bfloat16, True), "fp32": (torch.float32, False), "fp32_autocast": (torch.float32, True)}
MODES = ("reentrant", "non_reentrant")


def cases() -> list[tuple[str, str, str, str, str, float]]:
    """(style, regime, precision, attention, mode, lora_dropout)."""
    out = []
    for style in CONFIGS:
        for attn in ("sdpa", "eager"):
            for mode in MODES:
                for regime in ("full", "lora_fp32", "lora_bf16"):
                    out.append((style, regime, "bf16", attn, mode, 0.0))
                for regime in ("full", "lora_fp32"):
                    out.append((style, regime, "fp32", attn, mode, 0.0))
    for mode in MODES:
        for regime in ("full", "lora_fp32"):
            out.append(("llama", regime, "fp32_autocast", "sdpa", mode, 0.0))
        out.append(("llama", "lora_fp32", "bf16", "sdpa", mode, 0.05))
    return out


def key(style: str, regime: str, precision: str, attn: str, mode: str, dropout: float) -> str:
    return f"{style}/{regime}/{precision}/{attn}/{mode}" + (f"/drop{dropout:g}" if dropout else "")


class Blocks(TorchDispatchMode):
    """Storages created by dispatched ops while `on`, numbered in creation order, and their frees."""

    def __init__(self) -> None:
        super().__init__()
        self.on = False
        self.live: dict[int, tuple[int, weakref.ref]] = {}  # id(storage) -> (block number, weakref)
        self.events: list[int] = []
        self.ops: list[str] = []
        self.sizes: list[int] = []

    def start(self) -> None:
        self.live, self.events, self.ops, self.sizes, self.on = {}, [], [], [], True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not self.on:
            return out
        inputs = {id(t.untyped_storage()) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            st = t.untyped_storage()
            k, n = id(st), st.nbytes()
            if n == 0 or k in self.live or k in inputs:  # a view or an in-place result: no new storage
                continue
            i = len(self.sizes)

            def gone(_r, k=k, i=i):
                if self.live.pop(k, None) is not None and self.on:
                    self.events.append(~i)

            self.live[k] = (i, weakref.ref(st, gone))
            self.sizes.append(n)
            self.events.append(n)
            self.ops.append(func.overloadpacket.__name__)
        return out

    def block(self, t: torch.Tensor) -> int:
        return self.live[id(t.untyped_storage())][0]


def build(style: str, regime: str, precision: str, attn: str, mode: str, dropout: float):
    dtype, _ = PRECISIONS[precision]
    torch.manual_seed(0)
    d = dict(CONFIGS[style])
    conf = transformers.AutoConfig.for_model(d.pop("model_type"), **d)
    m = transformers.AutoModelForCausalLM.from_config(conf, attn_implementation=attn).to(dtype)
    m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": mode == "reentrant"})
    if regime != "full":
        from peft import LoraConfig, get_peft_model

        lc = LoraConfig(r=harness.LORA_R, lora_alpha=harness.LORA_ALPHA, lora_dropout=dropout,
                        target_modules="all-linear")
        m = get_peft_model(m, lc, autocast_adapter_dtype=regime == "lora_fp32")
        m.enable_input_require_grads()  # what Trainer does for PEFT + checkpointing
    m.train()
    base = m.get_base_model() if hasattr(m, "get_base_model") else m
    return m, base.model.layers


def measure(style: str, regime: str, precision: str, attn: str, mode: str, dropout: float) -> dict:
    m, layers = build(style, regime, precision, attn, mode, dropout)
    rec = Blocks()
    calls = {"pre": 0, "post": 0}
    got: dict[str, dict] = {}

    def snapshot(out: torch.Tensor) -> dict:
        ob = rec.block(out)
        live = sorted(i for i, _ in rec.live.values())
        kept = sum(rec.sizes[i] for i in live if i != ob)
        return {"forward": list(rec.events), "ops": list(rec.ops), "out": ob, "kept": kept}

    def enter(layer) -> None:
        if layer is layers[LAYER]:
            calls["pre"] += 1
            rec.start()
        elif layer is layers[LAYER + 1] and rec.on and "forward" in got and "done" not in got:
            got["forward"]["forward"] = list(rec.events)  # up to the next layer's start
            got["done"] = {}
            rec.on = False

    def leave(layer, output) -> None:
        if layer is not layers[LAYER]:
            return
        calls["post"] += 1
        out = output[0] if isinstance(output, tuple) else output
        if calls["post"] == 1:
            got["forward"] = snapshot(out)  # the frees after it, up to the next layer's start, are added there
        else:
            got["recompute"] = snapshot(out)
            rec.on = False

    _wrap_layer_forward(type(layers[LAYER]), enter, leave)
    _, autocast = PRECISIONS[precision]
    inputs = harness.make_inputs(CONFIGS[style]["vocab_size"])
    early = torch.utils.checkpoint.set_checkpoint_early_stop(False) if mode == "non_reentrant" \
        else contextlib.nullcontext()
    with rec, early:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = m(**inputs)
        loss = out.loss
        del out
        loss.backward()
    assert "recompute" in got, calls
    while _RESTORE:
        cell, orig = _RESTORE.pop()
        cell.cell_contents = orig
    fwd, rcp = got["forward"], got["recompute"]
    live_fwd = _live(fwd["forward"])
    return {"forward": fwd["forward"], "ops": fwd["ops"], "out": fwd["out"],
            "cached": [i for i in live_fwd if i != fwd["out"]],
            "recompute": rcp["forward"], "recompute_ops": rcp["ops"], "recompute_out": rcp["out"],
            "recompute_kept": rcp["kept"]}


def _wrap_layer_forward(cls, enter, leave) -> None:
    """Mark the start and end of the decoder layer's own forward, inside the checkpoint: transformers 5
    (modeling_layers.py GradientCheckpointingLayer.__init_subclass__) checkpoints `partial(forward, self)`, the class's
    original forward held in forward_with_checkpointing's closure, with module hooks outside the checkpoint; the
    closure's cell gets a wrapper that runs no tensor op, so the recomputation in backward is seen too."""
    wrapper = cls.forward
    cell = wrapper.__closure__[wrapper.__code__.co_freevars.index("forward")]
    orig = cell.cell_contents

    def marked(self, *args, **kwargs):
        enter(self)
        out = orig(self, *args, **kwargs)
        leave(self, out)
        return out

    cell.cell_contents = marked
    _RESTORE.append((cell, orig))


_RESTORE: list = []


def _live(events: list[int]) -> list[int]:
    """The blocks an event list leaves allocated."""
    made = [e for e in events if e > 0]
    gone = {~e for e in events if e < 0}
    return [i for i in range(len(made)) if i not in gone]


def main() -> None:
    import peft

    torch.set_num_threads(1)
    data = {"versions": {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__,
                         "peft": peft.__version__},
            "shape": {"B": harness.B, "S": harness.S, "layer": LAYER, "lora_r": harness.LORA_R, "configs": CONFIGS},
            "cases": {}}
    with warnings.catch_warnings(), harness.cuda_autocast_shim():
        warnings.simplefilter("ignore")
        for c in cases():
            data["cases"][key(*c)] = measure(*c)
            gc.collect()
            print(key(*c), len(data["cases"][key(*c)]["forward"]), flush=True)
    FIXTURE.write_text(json.dumps(data, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
