"""torchtune's loss without chunking (memory/loss.py, frameworks.Profile.drops_fp32_logits), measured on the CPU.

torchtune is not installed here; the code of its head and recipes is reproduced with its sources:
- the model: `output = self.output(h).float()` (modules/transformer.py v0.1.0 TransformerDecoder.forward, v0.2.1
  l.250, v0.4.0 l.652): the bf16 projection is freed as soon as it is upcast (nothing saves it);
- 0.1 and 0.2 recipes (full_finetune_single_device.py v0.2.1 l.448-458): `logits = logits[..., :-1, :].contiguous()`,
  `logits = logits.transpose(1, 2)`, `loss = self._loss_fn(logits, labels)`, `loss.backward()` with `logits`
  still referenced; their configs all use torch.nn.CrossEntropyLoss (CEWithChunkedOutputLoss is new in 0.3.0);
- 0.3 and 0.4 recipes (v0.4.0 l.626-641): `logits = logits.reshape(-1, logits.size(-1))`, the loss, `del logits`.
The live bytes of the loss's forward and of its backward are counted by the harness's LiveMem, in units of
N x V (tokens x vocabulary) bytes, and compared with the engine's logits_and_loss at those two moments.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="physics tests need torch: pip install -r requirements-physics.txt")

import torch
import torch.nn.functional as F
from harness import LiveMem

from sizing import load_config
from sizing.catalog import resolve_architecture
from sizing.step import step_memory

B, T, H, V = 2, 64, 64, 4096


def _measure(version: str) -> tuple[float, float, float]:
    """(live at the loss's forward peak, live at its backward peak, live after backward) above the body's output,
    in N x V bytes."""
    torch.manual_seed(0)
    output = torch.nn.Linear(H, V, bias=False).to(torch.bfloat16).requires_grad_(False)  # frozen head (LoRA)
    h = torch.randn(B, T, H, dtype=torch.bfloat16, requires_grad=True)  # the final norm's output
    labels = torch.randint(0, V, (B, T))
    tr = LiveMem()
    with tr:
        logits = output(h).float()
        # from here: the CPU's bf16 matmul has a transient of its own, and its backward keeps a V x H weight copy
        # and a B x T x H input copy (CPU kernels) that a GPU does not; on the GPU the projection's own moment
        # (bf16 + its fp32 copy, 6 N x V) stays below the loss's
        cpu_only = tr.cur - 4 * B * T * V  # the bf16 projection was freed by the upcast: only fp32 logits remain
        assert cpu_only == V * H * 2 + B * T * H * 2
        tr.peak = tr.cur
        if version < "0.3":
            logits = logits[..., :-1, :].contiguous()
            labels = labels[..., 1:].contiguous()
            logits = logits.transpose(1, 2)
            loss = F.cross_entropy(logits, labels)
        else:
            logits = logits.reshape(-1, logits.size(-1))
            loss = F.cross_entropy(logits, labels.reshape(-1))
            del logits
        forward = tr.peak
        tr.peak = tr.cur
        loss.backward()
        after = tr.cur - cpu_only  # (the CPU copies outlive this backward too); h.grad (B x T x H) is new
    nv = B * T * V
    return (forward - cpu_only) / nv, (tr.peak - cpu_only) / nv, after / nv


def _memory(version: str):
    """The engine's step for the tiny torchtune-shaped LoRA run at `version`."""
    conf = {"model_type": "llama", "vocab_size": V, "hidden_size": H, "intermediate_size": 2 * H,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
            "max_position_embeddings": 256, "tie_word_embeddings": False}
    cfg = load_config({"model_config": conf, "method": "lora", "framework": "torchtune", "framework_version": version,
                       "loss_implementation": "hf", "torch_dtype": "bfloat16", "max_seq_length": T,
                       "per_device_train_batch_size": B, "packing": True, "gradient_checkpointing": True,
                       "lora_dropout": 0.0})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    mem = step_memory(cfg, arch, None, backend="cpu")
    return mem


def _engine(version: str) -> tuple[float, float]:
    mem = _memory(version)
    nv = B * T * V
    fwd = next(m for m in mem.moments if m.step == 1 and m.what.startswith("cross-entropy on the logits"))
    bwd = next(m for m in mem.moments if m.step == 1 and m.what.startswith("gradient of the logits"))
    return fwd.parts["logits_and_loss"] / nv, bwd.parts["logits_and_loss"] / nv


def test_03_deletes_its_fp32_logits_before_backward():
    fwd, bwd, _ = _measure("0.4")
    assert fwd == pytest.approx(8, abs=0.6)  # fp32 logits + log-softmax output (the bf16 projection is gone)
    assert bwd == pytest.approx(12, abs=0.6)  # saved output + its gradient + the logits' gradient
    efwd, ebwd = _engine("0.4")
    assert efwd == pytest.approx(fwd, abs=0.6) and ebwd == pytest.approx(bwd, abs=0.6)
    assert _engine("0.3") == (efwd, ebwd)


def test_02_keeps_the_sliced_copy_through_backward():
    fwd, bwd, after = _measure("0.2")
    assert bwd == pytest.approx(16, abs=0.6)  # + the recipe's `logits` (the sliced fp32 copy) alive
    efwd, ebwd = _engine("0.2")
    assert ebwd == pytest.approx(bwd, abs=0.6)
    # forward: the CUDA log-softmax makes the transposed input contiguous (one more N x V fp32 copy) where the
    # CPU kernel reads it strided
    assert efwd == pytest.approx(fwd + 4, abs=0.6)
    assert _engine("0.1") == (efwd, ebwd)
    # after backward the recipe's `logits` (the sliced fp32 copy) is still alive, until the next forward returns
    # + the sliced labels and the loss (about 1 KiB)
    assert after * B * T * V == pytest.approx(4 * B * (T - 1) * V + B * T * H * 2, abs=2048)
    assert _held("0.2") == 4 * B * T * V and _held("0.4") == 0


def _held(version: str) -> int:
    """The engine's logits at the body's backward and at the optimizer step (step 1)."""
    mem = _memory(version)
    later = {m.parts["logits_and_loss"] for m in mem.moments if m.step == 1 and m.phase != "forward"
             and not m.what.startswith("gradient of the logits")}
    assert len(later) == 1
    return later.pop()


def _compiled_run(fn, inputs: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[int, list[tuple[str, str]]]:
    """Bytes the compiled loss saves for backward over all `inputs` (unique storages) and every buffer inductor's
    generated code allocates, forward and backward, as (shape, dtype)."""
    import re

    from torch._inductor.utils import run_and_get_code

    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    def step() -> None:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            total = sum(fn(x, y) for x, y in inputs)
        total.backward()

    _, codes = run_and_get_code(step)
    buffers = [(shape, dtype) for code in codes
               for shape, dtype in re.findall(r"= empty_strided_cpu\(\(([^)]*)\)[^)]*\), torch\.(\w+)", code)]
    return sum(saved.values()), buffers


def _engine_compiled(loss: str) -> tuple[int, int]:
    conf = {"model_type": "llama", "vocab_size": V, "hidden_size": H, "intermediate_size": 2 * H,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
            "max_position_embeddings": 256, "tie_word_embeddings": False}
    cfg = load_config({"model_config": conf, "method": "lora", "framework": "torchtune", "framework_version": "0.4",
                       "loss_implementation": loss, "torch_compile": True, "torch_dtype": "bfloat16",
                       "max_seq_length": T, "per_device_train_batch_size": B, "packing": True,
                       "gradient_checkpointing": True, "lora_dropout": 0.0})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    mem = step_memory(cfg, arch, None, backend="cpu")
    fwd = next(m for m in mem.moments if m.step == 1 and m.what.startswith("cross-entropy on the logits"))
    bwd = next(m for m in mem.moments if m.step == 1 and m.what.startswith("gradient of the logits"))
    return fwd.parts["logits_and_loss"], bwd.parts["logits_and_loss"]


# importing inductor imports torch.utils.mkldnn, whose torch.jit.script_method warns (torch 2.13); pyproject turns
# warnings into errors
_INDUCTOR_IMPORT = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")


@_INDUCTOR_IMPORT
def test_compiled_chunked_ce_keeps_only_the_bf16_chunks():
    # CEWithChunkedOutputLoss (v0.4.0 modules/loss/ce_chunked_output_loss.py) with compute_cross_entropy compiled
    # as training.compile_loss does; the model hands it 8 bf16 chunks of output(h) (TransformerDecoder.chunked_output)
    chunks, rows = 8, B * T // 8
    torch.manual_seed(0)

    def compute_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.float(), labels, ignore_index=-100, reduction="sum")

    ce = torch.compile(compute_cross_entropy, backend="inductor")
    inputs = [(torch.randn(rows, V, dtype=torch.bfloat16, requires_grad=True), torch.randint(0, V, (rows,)))
              for _ in range(chunks)]
    saved, buffers = _compiled_run(ce, inputs)
    nv = B * T * V
    # saved: the bf16 chunks, the labels and two fp32 statistics per row; nothing else
    assert saved == 2 * nv + 8 * B * T + 2 * 4 * B * T
    assert (f"{rows}, {V}", "float32") not in buffers  # no fp32 N x V buffer anywhere
    assert (f"{rows}, {V}", "bfloat16") in buffers  # backward: the chunk's bf16 gradient
    fwd, bwd = _engine_compiled("chunked_ce")
    assert fwd == saved
    assert bwd - saved == 2 * nv // chunks


@_INDUCTOR_IMPORT
def test_compiled_cross_entropy_saves_its_fp32_input():
    # torchtune >= 0.3 with nn.CrossEntropyLoss: compile_loss compiles the whole module; its input is the model's
    # output(h).float() (modules/transformer.py v0.4.0 l.652), reshaped to (N, V)
    torch.manual_seed(0)
    ce = torch.compile(torch.nn.CrossEntropyLoss(), backend="inductor")
    x = torch.randn(B * T, V, dtype=torch.float32, requires_grad=True)
    saved, buffers = _compiled_run(ce, [(x, torch.randint(0, V, (B * T,)))])
    nv = B * T * V
    assert saved - 4 * nv < 16 * B * T + 64  # the fp32 input + labels + two row statistics (+ scalars)
    assert buffers.count((f"{B * T}, {V}", "float32")) == 1  # backward: one fp32 gradient
    fwd, bwd = _engine_compiled("hf")
    assert fwd - 4 * nv == pytest.approx(2 * nv, abs=16 * B * T + 64)  # + the bf16 projection at its upcast
    assert bwd - 4 * nv == pytest.approx(4 * nv, abs=16 * B * T + 64)  # + the fp32 gradient


def test_eager_chunked_ce_keeps_the_fp32_log_softmax_of_every_chunk():
    # 0.3/0.4 recipes without compile: logits = model(...) (8 bf16 chunks), loss = CEWithChunkedOutputLoss,
    # del logits, backward (v0.4.0 full_finetune_single_device.py l.626-641, ce_chunked_output_loss.py)
    chunks = 8
    torch.manual_seed(0)
    output = torch.nn.Linear(H, V, bias=False).to(torch.bfloat16).requires_grad_(False)
    h = torch.randn(B, T, H, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, V, (B, T))
    tr = LiveMem()
    with tr:
        logits = [output(c) for c in h.chunk(chunks, dim=1)]
        cpu_only = tr.cur - 2 * B * T * V  # the CPU matmul's own copies (see _measure)
        tr.peak = tr.cur
        lab = [t.reshape(-1) for t in labels.chunk(chunks, dim=1)]
        flat = [c.reshape(-1, c.size(-1)) for c in logits]
        total = sum(F.cross_entropy(c.float(), t, ignore_index=-100, reduction="sum")
                    for c, t in zip(flat, lab, strict=True))
        loss = total / (labels != -100).sum()
        forward = tr.peak - cpu_only
        del logits, flat
        tr.peak = tr.cur
        loss.backward()
        backward = tr.peak - cpu_only
    nv, part = B * T * V, B * T * V // chunks
    assert forward == pytest.approx(2 * nv + 4 * nv + 4 * part, rel=0.02)  # chunks + fp32 log-softmax + one upcast
    assert backward == pytest.approx(4 * nv + 8 * part, rel=0.05)
    cfg = load_config({"model_config": {"model_type": "llama", "vocab_size": V, "hidden_size": H,
                                        "intermediate_size": 2 * H, "num_hidden_layers": 2, "num_attention_heads": 4,
                                        "num_key_value_heads": 4, "max_position_embeddings": 256,
                                        "tie_word_embeddings": False},
                       "method": "lora", "framework": "torchtune", "framework_version": "0.4",
                       "loss_implementation": "chunked_ce", "torch_dtype": "bfloat16", "max_seq_length": T,
                       "per_device_train_batch_size": B, "packing": True, "gradient_checkpointing": True,
                       "lora_dropout": 0.0})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    mem = step_memory(cfg, arch, None, backend="cpu")
    fwd = next(m for m in mem.moments if m.step == 1 and m.what.startswith("cross-entropy on the logits"))
    bwd = next(m for m in mem.moments if m.step == 1 and m.what.startswith("gradient of the logits"))
    assert fwd.parts["logits_and_loss"] == pytest.approx(forward, rel=0.02)
    assert bwd.parts["logits_and_loss"] == pytest.approx(backward, rel=0.05)


def _compile_loss(loss: torch.nn.Module) -> torch.nn.Module:
    """torchtune's training.compile_loss for a loss that is not chunked (training/_compile.py v0.4.0 l.64-86):
    `loss = torch.compile(loss, backend=backend); return loss`."""
    loss = torch.compile(loss, backend="inductor")
    return loss


def _engine_recipe(method: str, gpus: int) -> tuple[float, float]:
    """The engine's logits_and_loss (N x V bytes) at the loss's forward and backward, torchtune 0.4, compile on."""
    conf = {"model_type": "llama", "vocab_size": V, "hidden_size": H, "intermediate_size": 2 * H,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
            "max_position_embeddings": 256, "tie_word_embeddings": False}
    data = {"model_config": conf, "method": method, "framework": "torchtune", "framework_version": "0.4",
            "loss_implementation": "hf", "torch_compile": True, "torch_dtype": "bfloat16", "max_seq_length": T,
            "per_device_train_batch_size": B, "packing": True, "gradient_checkpointing": True, "num_gpus": gpus}
    if gpus > 1:
        data["parallelism"] = "fsdp"
    cfg = load_config(data)
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    mem = step_memory(cfg, arch, None, backend="cpu")
    nv = B * T * V
    fwd = next(m for m in mem.moments if m.step == 1 and m.what.startswith("cross-entropy on the logits"))
    bwd = next(m for m in mem.moments if m.step == 1 and m.what.startswith("gradient of the logits"))
    return fwd.parts["logits_and_loss"] / nv, bwd.parts["logits_and_loss"] / nv


@_INDUCTOR_IMPORT
def test_full_and_distributed_recipes_drop_the_compiled_cross_entropy():
    # full_finetune_single_device.py v0.4.0 l.288 (full_finetune_distributed l.299, lora_finetune_distributed
    # l.302): `training.compile_loss(self._loss_fn)`, the returned module dropped; lora_finetune_single_device
    # l.291 keeps it: `self._loss_fn = training.compile_loss(self._loss_fn)`
    from torch._dynamo.eval_frame import OptimizedModule

    dropped = torch.nn.CrossEntropyLoss()
    _compile_loss(dropped)
    kept = _compile_loss(torch.nn.CrossEntropyLoss())
    # torch.compile(module) wraps it in a new OptimizedModule and leaves the module itself as it was
    assert type(dropped) is torch.nn.CrossEntropyLoss and "forward" not in vars(dropped)
    assert isinstance(kept, OptimizedModule)
    # so the full and distributed recipes run the eager loss: the 0.3/0.4 eager measurement (test_03 above)
    fwd, bwd, _ = _measure("0.4")
    for method, gpus in (("full", 1), ("full", 2), ("lora", 2)):
        efwd, ebwd = _engine_recipe(method, gpus)
        assert efwd == pytest.approx(fwd, abs=0.6) and ebwd == pytest.approx(bwd, abs=0.6)
    # and the LoRA single-device recipe the compiled one (test_compiled_cross_entropy_saves_its_fp32_input)
    efwd, ebwd = _engine_recipe("lora", 1)
    assert efwd == pytest.approx(6, abs=0.01) and ebwd == pytest.approx(8, abs=0.01)


def test_chunked_head_backward_holds_every_logits_gradient_and_three_weight_gradients():
    # TransformerDecoder.chunked_output (v0.4.0 modules/transformer.py): the eight projections run, then the loss
    # upcasts and reduces each chunk (CEWithChunkedOutputLoss). A trained head (full fine-tuning), untied, eager loss;
    # the head's V x H weight is large next to the N x V logits so that the projections' backward is the peak.
    from torch.profiler import ProfilerActivity, profile, record_function

    b, t, h, v, chunks = 1, 64, 512, 1024, 8
    torch.manual_seed(0)
    weight = torch.nn.Parameter(torch.randn(v, h, dtype=torch.bfloat16) * 0.02)
    h0 = torch.randn(b, t, h, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, v, (b, t))
    order: list[str] = []

    def step() -> None:
        x = h0 * 1  # the final norm's output (a non-leaf, as in the model)
        logits = [F.linear(c, weight) for c in x.chunk(chunks, dim=1)]
        for i, lg in enumerate(logits):
            lg.register_hook(lambda g, i=i: order.append(f"projection {i}"))
        ups = [lg.reshape(-1, v).float() for lg in logits]
        for i, up in enumerate(ups):
            up.register_hook(lambda g, i=i: order.append(f"loss {i}"))
        total = sum(F.cross_entropy(up, lab.reshape(-1), reduction="sum")
                    for up, lab in zip(ups, labels.chunk(chunks, dim=1), strict=True))
        loss = total / (b * t)
        del logits, ups
        with record_function("backward"):
            loss.backward()

    x = h0 * 1  # warm-up: the profiled step allocates nothing of the previous one
    del x
    # oneDNN's bf16 matmul takes scratchpads from the same allocator on CPUs with AMX (about 1 MiB here, none on
    # others): the CPU's kernel workspace, not a tensor the step keeps, so the step runs on PyTorch's own kernels
    was = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            step()
    finally:
        torch._C._set_mkldnn_enabled(was)
    # every chunk's loss backward runs before the first projection's backward (younger nodes first)
    assert order[:chunks] == [f"loss {i}" for i in reversed(range(chunks))]
    assert order[chunks:] == [f"projection {i}" for i in reversed(range(chunks))]
    events = prof.profiler.kineto_results.events()
    start = next(e.start_ns() for e in events if e.name() == "backward")
    run = peak = 0
    for e in sorted((e for e in events if e.name() == "[memory]"), key=lambda e: e.start_ns()):
        run += e.nbytes()
        if e.start_ns() >= start:
            peak = max(peak, run)
    # live bytes from the step's first allocation (h0, the weight and labels come before it); x = h0 * 1 stands
    # for the final norm's output, which the engine books as body, not loss: subtracted
    body = b * t * h * 2
    nv, vh = b * t * v, v * h * 2
    measured = peak - body
    # all eight bf16 logits gradients less the two consumed, the buffered weight gradient, the new one and their
    # sum; + the input gradients (B x T x H bf16: the chunk's split gathers all eight, which the engine leaves out)
    assert measured == pytest.approx(2 * nv - 2 * (2 * nv // chunks) + 3 * vh + body, rel=0.001)
    conf = {"model_type": "llama", "vocab_size": v, "hidden_size": h, "intermediate_size": 2 * h,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
            "max_position_embeddings": 256, "tie_word_embeddings": False}
    cfg = load_config({"model_config": conf, "method": "full", "framework": "torchtune", "framework_version": "0.4",
                       "loss_implementation": "chunked_ce", "torch_dtype": "bfloat16", "max_seq_length": t,
                       "per_device_train_batch_size": b, "packing": True, "gradient_checkpointing": True})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    mem = step_memory(cfg, arch, None, backend="cpu")
    bwd = next(m for m in mem.moments if m.step == 1 and m.what.startswith("gradient of the logits"))
    assert bwd.parts["logits_and_loss"] == pytest.approx(measured - body, rel=0.001)
