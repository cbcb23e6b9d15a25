"""The model-load moment of torchtune's single-device QLoRA (sizing/memory/load.py), measured on the CPU.

torchao is not a dependency of this project, so torchao v0.1's NF4 quantization (dtypes/nf4tensor.py
l.133-150, l.220-300, l.292-350, l.378-450 at tag v0.1, the version torchtune 0.1 pins) is transcribed below
line for line, without the tensor subclass, and so is the chunked convert_to_norm_float_weight of torchao >= 0.2
(v0.3.0 l.633-666, unchanged at ao main; the real to_nf4 of each release is traced in
tests/physics/test_nf4_chunks.py). Its tensors are
traced through a TorchDispatchMode: what to_nf4 allocates and frees, in order, is the physics the engine's
NF4_QUANTIZE table must equal, and the live bytes of a tiny model built and loaded as torchtune does it
(each linear made on the device and quantized, then load_state_dict re-quantizing a bf16 copy of each) must
equal the load moment's allocated peak.
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch", reason="physics tests need torch: pip install -r requirements-physics.txt")

import harness  # noqa: E402

from sizing.catalog import resolve_architecture  # noqa: E402
from sizing.config import parse_config  # noqa: E402
from sizing.memory.load import NF4_DEQUANT, NF4_QUANTIZE  # noqa: E402
from sizing.step import outside, step_memory  # noqa: E402

NF4 = [-1.0000, -0.6962, -0.5251, -0.3949, -0.2844, -0.1848, -0.0911, 0.0000,
       0.0796, 0.1609, 0.2461, 0.3379, 0.4407, 0.5626, 0.7230, 1.0000]


# ---- torchao v0.1 dtypes/nf4tensor.py, transcribed (the NF4Tensor wrapper itself holds no storage) ----
def get_block_absmax(inpt_tensor, block_size):
    n_blocks = inpt_tensor.numel() // block_size
    blocks = inpt_tensor.view(n_blocks, block_size)
    block_scalers = blocks.abs().max(dim=1).values
    return block_scalers


def double_quantize_scalers(inpt_tensor, block_size, scaler_block_size):
    scalers_1 = get_block_absmax(inpt_tensor, block_size)
    scalers_1_mean = scalers_1.mean()
    scalers_1 = scalers_1 - scalers_1_mean
    n_scaler_blocks = scalers_1.numel() // scaler_block_size
    scaler_blocks = scalers_1.view(n_scaler_blocks, scaler_block_size)
    scaler_absmax = get_block_absmax(scalers_1, scaler_block_size)
    scaler_absmax = scaler_absmax.unsqueeze(-1).expand(n_scaler_blocks, scaler_block_size)
    quantization_factor = 256 / (2 * scaler_absmax)
    quantized_scaler_blocks = scaler_blocks * quantization_factor
    quantized_scaler_blocks = quantized_scaler_blocks.round()
    quantized_scaler_blocks = quantized_scaler_blocks.clamp(-128, 127)
    quantization_factor = quantization_factor[:, 0]
    return (quantized_scaler_blocks.flatten().to(torch.int8), quantization_factor.view(n_scaler_blocks),
            scalers_1_mean)


def quantize_tensor_nearest(value, nf4):
    value = value.unsqueeze(-1)  # (numel, 1)
    diff = (value - nf4).abs()
    closest_nf4 = diff.min(dim=-1).indices
    return closest_nf4


def convert_to_norm_float_weight(inpt_tensor, n_blocks, block_size, nf4):
    flattened_tensor = inpt_tensor.flatten()
    blocks = flattened_tensor.view(n_blocks, block_size)
    scalers = get_block_absmax(inpt_tensor.flatten(), block_size)
    scales = scalers.unsqueeze(-1).expand(n_blocks, block_size)
    scaled_blocks = blocks / scales
    quantized_blocks = quantize_tensor_nearest(scaled_blocks.flatten(), nf4)
    combined_blocks = quantized_blocks[::2] << 4 | quantized_blocks[1::2]
    return combined_blocks.to(torch.uint8)


def get_original_weight(data, quantized_scalers, quantization_factor, scaler_mean, shape, block_size=64,
                        scaler_block_size=256):
    nf4 = torch.tensor(NF4, dtype=torch.bfloat16)
    first_elements = (data >> 4).to(torch.long)
    second_elements = (data & 0b1111).to(torch.long)
    dequantized_first = nf4[first_elements]
    dequantized_second = nf4[second_elements]
    n_scaler_blocks = quantized_scalers.numel() // scaler_block_size
    inpt = quantized_scalers.view(n_scaler_blocks, scaler_block_size)
    scalers = (inpt / quantization_factor.unsqueeze(-1)).flatten().to(torch.bfloat16) + scaler_mean
    repeated = scalers.unsqueeze(-1).expand(scalers.size(0), block_size // 2)
    scaled_first = dequantized_first * repeated.flatten()
    scaled_second = dequantized_second * repeated.flatten()
    scaled_first = scaled_first.unsqueeze(-1).transpose(0, 1)
    scaled_second = scaled_second.unsqueeze(-1).transpose(0, 1)
    return torch.stack([scaled_first, scaled_second], dim=-1).reshape(shape)


def convert_to_norm_float_weight_chunked(inpt_tensor, n_blocks, block_size, nf4, chunk_size=1024**2):
    # torchao >= 0.2 (v0.3.0 l.633-666): the uint8 codes preallocated, quantize_tensor_nearest per chunk
    numel = inpt_tensor.numel()
    blocks = inpt_tensor.flatten().view(n_blocks, block_size)
    scalers = get_block_absmax(inpt_tensor.flatten(), block_size)
    scales = scalers.unsqueeze(-1).expand(n_blocks, block_size)
    scaled_blocks = blocks / scales
    quantized_blocks = torch.empty(numel, dtype=torch.uint8, device=inpt_tensor.device)
    flattened = scaled_blocks.flatten()
    for start in range(0, numel, chunk_size):
        end = min(start + chunk_size, numel)
        quantized_blocks[start:end] = quantize_tensor_nearest(flattened[start:end], nf4).to(torch.uint8)
    combined_blocks = quantized_blocks[::2] << 4 | quantized_blocks[1::2]
    return combined_blocks.to(torch.uint8)


def to_nf4(inpt_tensor, block_size=64, scaler_block_size=256, chunked=False):
    nf4 = torch.tensor(NF4, device=inpt_tensor.device, dtype=torch.bfloat16)
    n_blocks = inpt_tensor.numel() // block_size
    scalers = double_quantize_scalers(inpt_tensor.flatten(), block_size, scaler_block_size)
    if chunked:  # torchao >= 0.3 returns a contiguous factor (v0.3.0 l.602), 0.1 a view of the expanded one
        scalers = (scalers[0], scalers[1].contiguous(), scalers[2])
    convert = convert_to_norm_float_weight_chunked if chunked else convert_to_norm_float_weight
    data = convert(inpt_tensor, n_blocks, block_size, nf4)
    return (data, *scalers)
# ---- end of the transcription ----


def _table_peak(table, n):
    live, top = 0.0, 0.0
    sizes: dict[str, float] = {}
    for op, key, per in table:
        if op == "m":
            sizes[key] = per * n
            live += sizes[key]
            top = max(top, live)
        else:
            live -= sizes.pop(key)
    return top


def test_nf4_clone_dequantize_matches_the_engine_table():
    """torchtune's NF4 clone first rebuilds the bf16 weight (get_original_weight): its blocks and peak."""
    n = 256 * 1024
    q = to_nf4(torch.randn(512, 512, dtype=torch.bfloat16))
    with harness.LiveMem() as tr:
        for t in q[:3]:
            tr.add(t)
        w = get_original_weight(*q, (512, 512))
    big = [size for op, size in tr.events[3:] if op == "m" and size >= n // 2]
    assert big == [int(per * n) for op, _, per in NF4_DEQUANT if op == "m" and per >= 1 / 2]
    held = sum(t.untyped_storage().nbytes() for t in q[:3])
    assert tr.peak - held == pytest.approx(_table_peak(NF4_DEQUANT, n), rel=0.01)
    assert w.untyped_storage().nbytes() == 2 * n  # what to_nf4 then quantizes


def test_to_nf4_sequence_matches_the_engine_table():
    """Every block of at least N/8 bytes that to_nf4 allocates, in order, and its peak above the input."""
    n = 256 * 1024
    w = torch.randn(512, 512, dtype=torch.bfloat16)
    with harness.LiveMem() as tr:
        tr.add(w)  # the input, as the engine's replay holds it (allocated before the call)
        kept = to_nf4(w)
    big = [(op, size) for op, size in tr.events[1:] if size >= n // 8]
    table = [(op, int(per * n)) for op, _, per in NF4_QUANTIZE if op == "m" and per >= 1 / 8]
    assert [s for op, s in big if op == "m"] == [s for _, s in table]
    # peak over the input's own 2N bytes: the engine's table replayed without the allocator
    assert tr.peak - 2 * n == pytest.approx(_table_peak(NF4_QUANTIZE, n), rel=0.01)
    assert kept[0].numel() == n // 2  # packed data: two 4-bit codes per byte


TINY = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 3,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "tie_word_embeddings": False,
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "head_dim": 64}


@pytest.mark.parametrize("version", ["0.4", "0.3", "0.2", "0.1"])
def test_load_peak_equals_a_torchtune_style_build(version):
    """Build and load a tiny Llama the way lora_finetune_single_device does with NF4 bases (allocated peak);
    torchtune <= 0.3 builds one layer and deep-copies it (NF4 clone: dequantize, then to_nf4); torchtune 0.2's
    torchao 0.3.1 quantizes the CPU checkpoint on the CPU and copies it in place (nothing on the device)."""
    cloned = version in ("0.3", "0.2", "0.1")
    chunked = version != "0.1"  # torchtune 0.1's torchao 0.1 quantizes the whole weight at once
    on_host = version == "0.2"
    cfg = parse_config({"model": None, "model_config": TINY, "framework": "torchtune", "method": "qlora",
                        "framework_version": version,
                        "r": 8, "lora_alpha": 16, "max_seq_length": 64, "per_device_train_batch_size": 1,
                        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                           "down_proj"], "gpu": "RTX-4090-24GB"})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    (load,) = outside(step_memory(cfg, arch, None), False)
    h, i, kv = TINY["hidden_size"], TINY["intermediate_size"], TINY["num_key_value_heads"] * TINY["head_dim"]
    shapes = [(h, h), (kv, h), (kv, h), (h, h), (i, h), (i, h), (h, i)]  # q k v o gate up down: (out, in)
    r = 8
    bf = torch.bfloat16
    # the CPU state dict is host memory, made before the trace (a peak before load_state_dict must not lose it)
    cpu = [torch.randn(o, i_, dtype=bf) for _ in range(TINY["num_hidden_layers"]) for o, i_ in shapes]
    def embedding_and_head():  # tok_embeddings, then output_proj: the builders make them after the layer(s)
        return [torch.empty(TINY["vocab_size"], h, dtype=bf).fill_(0) for _ in range(2)]

    with harness.LiveMem() as tr:
        keep = []
        nf4 = []
        proto = []
        if cloned:
            for out_f, in_f in shapes:
                weight = torch.empty(out_f, in_f, dtype=bf).uniform_()
                proto.append(to_nf4(weight, chunked=chunked))
                del weight
                proto += [torch.zeros(r, in_f), torch.zeros(out_f, r)]
            proto += [torch.ones(h, dtype=bf), torch.ones(h, dtype=bf)]
            keep += embedding_and_head()  # lora_llama2 v0.1.0 l.225-240: layer, tok_embeddings, output_proj
        for _layer in range(TINY["num_hidden_layers"]):
            for k, (out_f, in_f) in enumerate(shapes):
                if cloned:  # copy.deepcopy(layer): NF4 clone = to_nf4(get_original_weight())
                    weight = get_original_weight(*proto[3 * k], (out_f, in_f))
                else:
                    weight = torch.empty(out_f, in_f, dtype=bf).uniform_()  # nn.Linear on the device
                nf4.append(to_nf4(weight, chunked=chunked))
                del weight
                if cloned:  # then Tensor.__deepcopy__ swaps in copies of the source's inner tensors
                    # (test_deepcopy_of_a_wrapper_subclass_copies_its_dict below)
                    nf4[-1] = copy.deepcopy(proto[3 * k])  # a view's whole storage, as deepcopy does
                keep += [torch.zeros(r, in_f), torch.zeros(out_f, r)]  # lora_a, lora_b (fp32 adapters)
            keep += [torch.ones(h, dtype=bf), torch.ones(h, dtype=bf)]  # the layer's two RMSNorm weights
        if not cloned:  # lora_llama3_1 v0.4.0 l.209-257: the layers' loop, tok_embeddings, output_proj
            keep += embedding_and_head()
        del proto
        keep.append(torch.ones(h, dtype=bf))  # the final norm
        for k, src in enumerate(cpu):  # load_state_dict: copy_ into each NF4 weight
            if on_host:  # from_tensor(src) on the CPU, then the NF4 tensors copied in place: no device memory
                continue
            on_device = src.clone()  # torchao >= 0.5: from_tensor(src.to(device)), copied in place, dropped
            new = to_nf4(on_device, chunked=chunked)
            nf4[k] = new
            del on_device, new
        measured = tr.peak
    # the engine holds adapters in the run's adapter dtype and NF4 state per torchao's layout; compare the
    # transient on top of the weights, the quantity the load moment adds
    static = sum(load.moment.parts[k] for k in ("weights", "quantization_state", "adapters"))
    engine_transient = load.moment.total - static
    kept_now = sum(st.nbytes() for st, _ in [(ref(), None) for _, ref in tr.live.values()] if st is not None)
    measured_transient = measured - kept_now
    print(f"load transient: engine {engine_transient} B, measured {measured_transient} B")
    assert engine_transient == pytest.approx(measured_transient, rel=0.02)


def test_deepcopy_of_a_wrapper_subclass_copies_its_dict():
    """torch's Tensor.__deepcopy__ on a wrapper subclass (data_ptr 0, as NF4Tensor): it calls clone(), then sets the
    clone's __dict__ to a deep copy of the source's, so the clone's own inner tensors die and copies of the
    source's stay (what memory/load.py _Run.clone replays after NF4's clone)."""
    import weakref

    made = []

    class Wrapped(torch.Tensor):
        @staticmethod
        def __new__(cls, inner):
            t = torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device)
            t.inner = inner
            return t

        def __init__(self, inner):
            pass

        __torch_function__ = torch._C._disabled_torch_function_impl

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.clone.default:  # as NF4's: a new inner tensor from the source's values
                fresh = args[0].inner * 2
                made.append(weakref.ref(fresh))
                return Wrapped(fresh)
            raise NotImplementedError(func)

    src = Wrapped(torch.arange(1024, dtype=torch.bfloat16))
    assert src.data_ptr() == 0
    out = copy.deepcopy(src)
    assert len(made) == 1 and made[0]() is None  # the clone's inner tensor was dropped
    assert torch.equal(out.inner, src.inner)  # a copy of the source's (not the clone's doubled values)
    assert out.inner.untyped_storage().data_ptr() != src.inner.untyped_storage().data_ptr()


def test_llama2_7b_qlora_init_reserves_what_the_tutorial_logged():
    """torchtune's QLoRA tutorial logs the peak memory reserved at model init of llama2/7B_qlora_single_device
    (torchtune 0.1, torchao 0.1): 9.13 GB (docs/source/tutorials/qlora_finetune.rst at fef3ed10, l.166, "Peak memory
    reserved, model init"; torchtune's memory_stats_log divides by 1e9). The replayed load's reserved peak depends on
    the build order: the prototype layer is quantized before tok_embeddings and the output projection are made
    (memory/load.py head_and_embedding); with them made first the replay reserves 7.91 GB."""
    cfg = parse_config({"model": "meta-llama/Llama-2-7b-hf", "framework": "torchtune", "framework_version": "0.1",
                        "method": "qlora", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                        "quantization_backend": "torchao", "torch_dtype": "bfloat16", "r": 8, "lora_alpha": 16,
                        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                           "down_proj"],
                        "max_seq_length": 512, "per_device_train_batch_size": 2, "gradient_checkpointing": True})
    arch, _ = resolve_architecture(cfg.model, cfg.model_config)
    (load,) = outside(step_memory(cfg, arch, None), False)
    assert load.reserved / 1e9 == pytest.approx(9.13, rel=0.01)
