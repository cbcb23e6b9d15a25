# Trainable tensors of the PEFT tuners other than LoRA/DoRA, from peft 0.21.2 tuners/<name>/layer.py.
from __future__ import annotations

from dataclasses import dataclass

from ..arch import Architecture, Linear
from ..config import RunConfig
from ..errors import SizingError

Tensors = list[tuple[int, int, int]]  # (rows, cols, how many), as adapters.Trainable.tensors

# Forward/backward not walked tensor by tensor: activations are the LoRA pattern at rank r (or the frozen base
# for the methods with no per-module adapter), so the estimate says confidence "low" and why.
APPROXIMATE = {
    "adalora": "AdaLoRA's saved tensors are modelled from CPU measurements with a 16-bit base (LoRA's at r = init_r, "
               "plus lora_A * lora_E and the scaled update per token)",
    "loha": "LoHa's saved tensors are modelled from CPU measurements (LoRA's input copy and the dense delta weight "
            "its forward builds); the Hadamard product's backward temporaries are not counted",
    "lokr": "LoKr's saved tensors are modelled from CPU measurements (LoRA's input copy, the dense Kronecker delta "
            "weight its forward builds and a decomposed factor's product); the backward temporaries are not counted",
    "oft": "OFT's saved tensors are modelled from CPU measurements with a 16-bit base (the input's fp32 copy in r "
           "blocks and the Cayley solve's blocks)",
    "boft": "BOFT's saved tensors are modelled from CPU measurements with a 16-bit base (the layer input as it is, "
            "its scaled output per token, and per adapted layer the in x in rotation it builds each forward and the "
            "Cayley solve's blocks); with boft_n_butterfly_factor 1 and block size 4, PEFT's defaults",
    "prefix_tuning": "prefix tuning's saved tensors are modelled as the frozen base's (the prefix keys/values "
                     "attended by every layer are not walked)",
    "miss_bat": "MiSS with init_weights='bat' is modelled from CPU measurements with a 16-bit base (LoRA's input "
                "copy, and per adapted layer the weight cast to the adapters' dtype and the updated weight built from "
                "it, two d_out x d_in tensors); their temporaries are not counted",
    "ln_tuning": "LayerNorm tuning's saved tensors are modelled as the frozen base's plus, for RMSNorm, each trained "
                 "norm's normalised input (measured on CPU); the final norm's is not counted",
    "prompt_tuning": "prompt tuning is modelled as the frozen base on max_seq_length + num_virtual_tokens tokens",
    "shira": "SHiRA's saved tensors are modelled from CPU measurements with a 16-bit base (the input as it is, the "
             "full new weight per adapted layer and its sparse delta's entries)",
    "hra": "HRA's saved tensors are modelled from CPU measurements with a 16-bit base (LoRA's input copy, the r + 1 "
           "fp32 in x in products of its reflections and the reflected weight)",
    "delora": "DeLoRA's saved tensors are modelled from CPU measurements with a 16-bit base (LoRA's plus its "
              "normalised r-wide intermediate)",
    "hira": "HiRA's saved tensors are modelled from CPU measurements with a 16-bit base (LoRA's input copy and the "
            "full Hadamard-product weight)",
    "fourierft": "FourierFT's saved tensors are modelled from CPU measurements: LoRA's input copy, the dense out x in "
                 "update it builds from the spectrum and its frequency indices; the update's temporaries are not "
                 "counted",
    "randlora": "RandLoRA's saved tensors are modelled from CPU measurements with a 16-bit base (its min(in, out)-wide "
                "fp32 intermediate per token; its random bases are buffers, not counted)",
    "pvera": "PVeRA's saved tensors are modelled from CPU measurements with a 16-bit base (VeRA's with its 2r-wide "
             "sample and its two r-wide halves per token)",
    "c3a": "C3A's saved tensors are modelled from CPU measurements with a 16-bit base (LoRA's fp32 input copy; its "
           "block-circulant FFT temporaries are not walked)",
    "road": "RoAd's saved tensors are modelled as the frozen base's plus its two fp32 [tokens, out] tensors per "
            "adapted layer (the upcast output and its rotated half; measured on CPU, not walked op by op)",
    "waveft": "WaveFT's saved tensors are modelled as LoRA's input copy plus, per adapted layer, its dense out x in "
              "update and wavelet coefficients (measured on CPU); the update's forward and backward temporaries are "
              "not counted",
    "p_tuning": "P-tuning is modelled as the frozen base on max_seq_length + num_virtual_tokens tokens (the MLP "
                "encoder runs once per step on the virtual tokens: its activations are not counted)",
    "vblora": "VB-LoRA's saved tensors are modelled as LoRA's at rank r plus the A and B it assembles from the bank "
              "(measured on CPU); its top-k gathers' temporaries are not counted",
    "unilora": "UniLoRA's saved tensors are modelled as LoRA's at rank r plus the A and B it gathers from its vector "
               "(measured on CPU); its gathers' temporaries are not counted",
    "deft": "DEFT's saved tensors are modelled from CPU measurements with a bf16 base (its fp32 output, projections "
            "and rebuilt factors); under autocast it returns its input's dtype, which the walk does not follow",
    "lily": "Lily's saved tensors are modelled as LoRA's at rank r plus its router's softmax and the combined B "
            "(measured on CPU with a bf16 base); its backward temporaries are not counted",
    "peanut": "PEANuT's saved tensors are modelled from CPU measurements: the fp32 input copy, an fp32 copy of each "
              "adapted weight and the dense update built from it; the update's temporaries are not counted",
    "tinylora": "TinyLoRA's saved tensors are modelled as LoRA-FA's at rank r (its A and B are frozen buffers, "
                "measured on CPU); autocast's copies of its buffers are not walked",
    "glora": "GLoRA's saved tensors are modelled from CPU measurements (the layer input as it is and the dense "
             "effective weight it builds); its forward and backward temporaries, out x in each, are not counted",
    "trainable_tokens": "trainable tokens are modelled as the frozen base whose embedding (and tied head) weight "
                        "is rebuilt each forward: the tied head keeps that vocab x hidden copy and its input; "
                        "the copies and gradients made in the embedding's forward and backward are not counted",
    "psoft": "PSOFT's saved tensors are modelled as LoRA-FA's at rank r (its A and B are frozen buffers, measured on "
             "CPU); the SVD that builds them at load, which can raise the reserved peak, is not modelled",
    "adamss": "AdaMSS's saved tensors are modelled from CPU measurements (its r-wide projection, each subspace's "
              "output and the base-dtype copies of its projection and factors); its scatter's tokens x out "
              "temporaries are not counted, and its parameter count assumes every KMeans cluster has at least "
              "subspace_rank rows (exact at subspace_rank 1)",
    "adaption_prompt": "adaption prompt is modelled as the frozen base plus, per layer, its recomputed query, its "
                       "softmax over the prompt tokens and the prompt's keys and values for each sequence (measured "
                       "on CPU with a 16-bit base); the layers before the first adapted one are counted as adapted "
                       "and as keeping what a frozen layer keeps, an upper bound when adapter_layers is below the "
                       "model's layer count",
    "frod": "FRoD's saved tensors are modelled from CPU measurements with a 16-bit input (its input projected on the "
            "shared basis per token, the dense sparse matrix it builds each forward and, on a GPU, the copies of the "
            "basis and indices it keeps in CPU memory); the sparse matrix's backward temporaries are not counted, "
            "and a 32-bit input takes a sparse path that is not walked",
}
# PEFT's default target_modules where a tuner's own mapping is not LoRA's (peft 0.21.2 utils/constants.py,
# TRANSFORMERS_MODELS_TO_<TUNER>_TARGET_MODULES_MAPPING; the others copy LoRA's): IA3's, with the feed-forward
# modules whose input ia3_l scales (TRANSFORMERS_MODELS_TO_IA3_FEEDFORWARD_MODULES_MAPPING); a model type missing
# from a mapping has no default, and PEFT asks for target_modules (or feedforward_modules). "mlp.X": X of the MLP.
_KVD, _QVD = (("k_proj", "v_proj", "down_proj"), ("down_proj",)), (("q_proj", "v_proj", "down_proj"), ("down_proj",))
IA3_DEFAULTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "llama": _KVD, "mistral": _KVD, "mixtral": (("k_proj", "v_proj", "w2"), ("w2",)),
    "llama4": (("q_proj", "v_proj", "down_proj"), ("down_proj",)),
    "qwen2": _QVD, "qwen3": _QVD, "gemma": _QVD, "gemma2": _QVD, "gemma3_text": _QVD,
    "gpt_neox": (("query_key_value", "dense_4h_to_h"), ("dense_4h_to_h",)),
    "falcon": (("query_key_value", "dense_4h_to_h"), ("dense_4h_to_h",)),
    "bloom": (("query_key_value", "mlp.dense_4h_to_h"), ("mlp.dense_4h_to_h",)),
    "gpt2": (("c_attn", "mlp.c_proj"), ("mlp.c_proj",)), "gpt_bigcode": (("c_attn", "mlp.c_proj"), ("mlp.c_proj",)),
    "opt": (("q_proj", "k_proj", "fc2"), ("fc2",)), "gptj": (("q_proj", "v_proj", "fc_out"), ("fc_out",)),
    "phi": (("q_proj", "v_proj", "fc2"), ("fc2",)),
}
# AdaLoRA's mapping lists every projection of OPT and leaves out some model types LoRA's has; VeRA's Phi: q and v.
_OWN_DEFAULTS: dict[str, dict[str, tuple[str, ...]]] = {
    "adalora": {"opt": ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"), "mistral": (), "falcon": (),
                "mixtral": (), "stablelm": (), "mpt": (), "phi": (), "chatglm": ()},
    "vera": {"phi": ("q_proj", "v_proj")},
    "shira": {"phi": ("q_proj", "v_proj")},
    "fourierft": {"gpt2": ("mlp.c_proj",), "gpt_bigcode": ("mlp.c_proj",)},
    "pvera": {"phi": ("q_proj", "v_proj")},  # a copy of VeRA's mapping
    "c3a": {"gpt2": ("mlp.c_proj",), "gpt_bigcode": ("mlp.c_proj",)},
    "waveft": {"gpt2": ("mlp.c_proj",), "gpt_bigcode": ("mlp.c_proj",)},
}
_OWN_DEFAULTS["vblora"] = _OWN_DEFAULTS["adalora"]  # VB-LoRA's mapping leaves out the same model types
# BEFT's own mapping (TRANSFORMERS_MODELS_TO_BEFT_TARGET_MODULES_MAPPING): v_proj of these decoders, nothing else.
BEFT_DEFAULTS = ("opt", "gptj", "gpt_neo", "llama", "llama4", "mistral", "mixtral", "phi", "gemma", "gemma2",
                 "gemma3_text", "qwen2", "qwen3")


def default_targets(kind: str, model_type: str, lora: tuple[str, ...]) -> tuple[str, ...]:
    """PEFT's target_modules for `kind` when none are given (empty: PEFT has none for this model type)."""
    if kind == "ia3":
        return IA3_DEFAULTS.get(model_type, ((), ()))[0]
    if kind == "beft":
        return ("v_proj",) if model_type in BEFT_DEFAULTS else ()
    return _OWN_DEFAULTS.get(kind, {}).get(model_type, lora)


# Tuners whose layers are LoRA-shaped in the activation walk (sizing/memory/activations.py, rank r).
LORA_SHAPED = ("lora", "lora_fa", "adalora", "vera", "loha", "lokr", "oft", "boft", "miss", "gralora", "shira", "hra",
               "delora", "hira", "randlora", "pvera", "c3a", "waveft", "fourierft", "vblora", "unilora", "lily",
               "peanut", "deft", "tinylora", "glora", "psoft")


def factorization(dimension: int, factor: int = -1) -> tuple[int, int]:
    """peft tuners/lokr/layer.py::factorization: dimension = m * n with m <= n, m near `factor` or sqrt."""
    if factor > 0 and dimension % factor == 0:
        return factor, dimension // factor
    if factor == -1:
        factor = dimension
    m, n = 1, dimension
    length = m + n
    while m < n:
        new_m = m + 1
        while dimension % new_m != 0:
            new_m += 1
        new_n = dimension // new_m
        if new_m + new_n > length or new_m > factor:
            break
        m, n = new_m, new_n
    return (n, m) if m > n else (m, n)


def _lokr(lin: Linear, r: int, factor: int, k: int) -> Tensors:
    """LoKr update_layer (Linear, decompose_both False): lokr_w1 [a, c] and lokr_w2 [b, d] or its rank-r pair."""
    out_l, out_k = factorization(lin.out_features, factor)
    in_m, in_n = factorization(lin.in_features, factor)
    t: Tensors = [(out_l, in_m, k)]  # use_w1 = not (decompose_both and ...): always with decompose_both False
    if r < max(out_k, in_n) / 2:
        t += [(out_k, r, k), (r, in_n, k)]
    else:
        t.append((out_k, in_n, k))
    return t


def module_tensors(cfg: RunConfig, lin: Linear, k: int, feedforward: bool = False) -> Tensors:
    """The trainable tensors the run's tuner adds to `k` copies of the Linear `lin` (`feedforward`: IA3 scales its
    input); its size fields read from the run configuration."""
    kind, r, i, o = cfg.peft_type, cfg.r, lin.in_features, lin.out_features
    if kind == "lora_fa":  # lora_A frozen by create_lorafa_optimizer: only lora_B [out, r] trains
        return [(o, r, k)]
    if kind == "adalora":  # SVDLinear: lora_A [r, in], lora_E [r, 1], lora_B [out, r]; ranknum is frozen
        return [(r, i, k), (r, 1, k), (o, r, k)]
    if kind == "vera":  # vera_lambda_d [r], vera_lambda_b [out]; vera_A/vera_B are shared buffers (fp32
        # [r, widest in] and [widest out, r] for the whole model: a few MB, not counted)
        return [(1, r, k), (1, o, k)]
    if kind == "loha":  # hada_w1_a/w2_a [out, r], hada_w1_b/w2_b [r, in]
        return [(o, r, 2 * k), (r, i, 2 * k)]
    if kind == "lokr":
        return _lokr(lin, r, cfg.decompose_factor, k)
    if kind == "oft":  # r blocks of size in/r, each a skew-symmetric matrix stored as its upper triangle
        b = i // r
        return [(r, b * (b - 1) // 2, k)]
    if kind == "boft":  # PEFT defaults boft_block_size=4, boft_n_butterfly_factor=1: boft_R [1, in/4, 4, 4], boft_s
        return [(i // 4, 16, k), (o, 1, k)]
    if kind == "miss":  # miss_block [r, out] (init_weights=True), [out / r, r, r] (bat), [r, mini_r] (mini)
        return [(r, cfg.mini_r, k)] if cfg.miss_init == "mini" else [(r, o, k)]  # tuners/miss/layer.py
    if kind == "gralora":  # gralora_A [gk, in/gk, r], gralora_B [gk, r, out/gk]: LoRA's count (hybrid_r = 0)
        return [(r, i, k), (o, r, k)]
    if kind == "shira":  # shira_weight: r * (in + out) values of a sparse delta (LoRA's count at rank r)
        return [(1, r * (i + o), k)]
    if kind == "hra":  # hra_u [in, r]: r Householder vectors
        return [(i, r, k)]
    if kind == "delora":  # delora_A [r, in], delora_B [out, r], delora_lambda [1]; delora_w_norm is a buffer
        return [(r, i, k), (o, r, k), (1, 1, k)]
    if kind == "hira":  # hira_A [r, in], hira_B [out, r]: LoRA's count
        return [(r, i, k), (o, r, k)]
    if kind == "fourierft":  # fourierft_spectrum [n_frequency]; its indices are a buffer
        return [(1, cfg.n_frequency or 0, k)]
    if kind == "randlora":  # randlora_lambda [r, nb], randlora_gamma [nb, min(in, out)], nb = ceil(min(in, out) / r)
        bases = -(-min(i, o) // r)
        return [(r, bases, k), (bases, min(i, o), k)]
    if kind == "pvera":  # pvera_lambda_d [2r] (mean and log-variance), pvera_lambda_b [out]; A, B shared buffers
        return [(1, 2 * r, k), (1, o, k)]
    if kind == "c3a":  # c3a_kernel [out / b, in / b, b] (fp32 whatever the adapter dtype: a few MB)
        b = cfg.block_size
        return [((o // b) * (i // b), b, k)]
    if kind == "beft":  # beft_bias [1, out]: a trained bias on the output
        return [(1, o, k)]
    if kind == "road":  # road_theta and road_alpha, out/2, out or 2 out each (road_1, road_2, road_4)
        return [(1, o * {"road_1": 1, "road_2": 2, "road_4": 4}[cfg.road_variant], k)]
    if kind == "waveft":  # waveft_spectrum [n_frequency]; its random positions are a plain tensor, not a parameter
        return [(1, cfg.n_frequency or 0, k)]
    if kind == "vblora":  # vblora_logits_A [r, in / L, N], vblora_logits_B [out / L, r, N]; the bank: once (_other)
        n, length = cfg.num_vectors, cfg.vector_length
        return [(r * (i // length), n, k), ((o // length) * r, n, k)]
    if kind == "unilora":  # nothing per module: one theta_d for the model (_other); indices and scales are buffers
        return []
    if kind == "deft":  # deft_P [out, r'] and (not under PaRa) deft_R [r', in]; r' = min(r, out) (update_layer)
        rr = min(r, o)
        return [(o, rr, k)] + ([] if cfg.deft_para else [(rr, i, k)])
    if kind in ("lily", "tinylora"):  # shared across layers: adapters._lily, adapters._other
        return []
    if kind == "psoft":  # psoft_R: the upper triangle of a skew r x r matrix (or all of it), and r-wide scales
        return [(1, r * (r - 1) // 2 if cfg.psoft_orth else r * r, k)] + [(1, r, k)] * (cfg.psoft_mag_a +
                                                                                          cfg.psoft_mag_b)
    if kind == "glora":  # A and B paths each: Xd [out, r] and Xu [r, in], [out, 1] or [1]; on a layer with a bias
        # the C path ([in, r] and [r, 1], or [in, 1]) and D and E ([out] or [1] each) too (tuners/glora/layer.py)
        ab = {"lora": [(o, r, 2 * k), (r, i, 2 * k)], "vector": [(o, 1, 2 * k)], "constant": [(1, 1, 2 * k)],
              "none": []}[cfg.config_A_B]
        if not lin.bias:
            return ab
        c = {"lora": [(i, r, k), (r, 1, k)], "vector": [(i, 1, k)], "none": []}[cfg.config_C]
        de = {"vector": [(1, o, 2 * k)], "constant": [(1, 1, 2 * k)], "none": []}[cfg.config_D_E]
        return ab + c + de
    if kind == "peanut":  # peanut_A [r, out], peanut_B [out, r], depth encoder and decoder layers [r, r] each
        return [(r, o, 2 * k)] + ([(r, r, 2 * cfg.depth * k)] if cfg.depth else [])
    if kind == "adamss":  # num_subspaces x adamss_A [R, r_e] and adamss_B [rows of the cluster, R]: out rows in all
        rank, groups, sub = _adamss(cfg, lin)
        return [(sub, rank, groups * k), (o, sub, k)]
    if kind == "frod":  # frod_lambda_l [in] and frod_lambda_s_values [nnz] (tuners/frod/layer.py update_layer)
        return [(1, i, k), (1, _frod_nnz(i, cfg.sparse_rate), k)]
    if kind == "ia3":  # ia3_l: [1, in] on a feed-forward module, else [out, 1]
        return [(1, i if feedforward else o, k)]
    raise ValueError(kind)


def _frod_nnz(width: int, rate: float) -> int:
    """FRoD's trained off-diagonal entries of S [width, width] (tuners/frod/model.py _init_frod_projection_buffers)."""
    off = width * width - width
    nnz = min(int(width * width * rate), off)
    return max(1, nnz) if rate > 0 and off > 0 else nnz


def _adamss(cfg: RunConfig, lin: Linear) -> tuple[int, int, int]:
    """AdaMSS's (r_e, K_e, R) on `lin` (tuners/adamss/layer.py update_layer, utils.py slice_pca and clustering_Z): the
    SVD rank within the weight (its bias a column more), at most one cluster per output row, and a subspace rank of at
    least 1; a cluster smaller than R would get its own size, which KMeans decides (assumed not to happen)."""
    return (min(cfg.r, lin.out_features, lin.in_features + lin.bias), min(cfg.num_subspaces, lin.out_features),
            max(1, cfg.subspace_rank))


def ia3_pieces(scaled: tuple[Linear, ...], ff: tuple[Linear, ...], adapter_bytes: int, result_bytes: int) -> list[int]:
    """Per-token bytes IA3 saves per layer (ia3/layer.py Linear.forward): the multiply by ia3_l keeps the frozen
    output (result_bytes) of a non-feed-forward module, and the input cast to ia3_l's dtype of a feed-forward one."""
    return [(lin.in_features * adapter_bytes if lin in ff else lin.out_features * result_bytes) * lin.count
            for lin in scaled]


def ia3_constant(scaled: tuple[Linear, ...], ff: tuple[Linear, ...], adapter_bytes: int) -> int:
    """Bytes per layer: `ia3_scaling = 1 * ia3_l.flatten()` is a new tensor, saved by each multiply."""
    return sum((lin.in_features if lin in ff else lin.out_features) * lin.count * adapter_bytes for lin in scaled)


def widths_ok(kind: str, lin: Linear, r: int) -> bool:
    """Whether PEFT accepts rank r on `lin`: OFT needs in_features divisible by r (oft/layer.py update_layer), MiSS
    r <= in_features (miss/layer.py update_layer), SHiRA no more values than the weight has (shira/layer.py
    update_layer: r * (in + out) <= in * out)."""
    if kind == "miss":
        return r <= lin.in_features
    if kind == "shira":
        return r * (lin.in_features + lin.out_features) <= lin.in_features * lin.out_features
    if kind == "psoft":  # psoft/layer.py update_layer: r <= min(in_features, out_features)
        return r <= min(lin.in_features, lin.out_features)
    return kind != "oft" or lin.in_features % r == 0


def prompt_tensors(kind: str, arch: Architecture, tokens: int, encoder: int | None = None) -> Tensors:
    """Prompt tuning: the prompt embedding [tokens, hidden]; P-tuning: that and its MLP encoder (tuners/p_tuning/
    model.py: Linear(d, h), Linear(h, h), Linear(h, d), each with its bias; h = encoder_hidden_size, else d); prefix
    tuning (no projection): one key and one value per layer and virtual token, at the KV width (peft
    utils/peft_types + _prepare_prompt_learning_config)."""
    d = arch.hidden
    if kind == "prompt_tuning":
        return [(tokens, d, 1)]
    if kind == "p_tuning":
        h = encoder or d
        return [(tokens, d, 1), (h, d, 1), (1, h, 1), (h, h, 1), (1, h, 1), (d, h, 1), (1, d, 1)]
    return [(tokens, arch.layers * 2 * arch.kv_width, 1)]


def adaption_prompt(cfg: RunConfig, arch: Architecture) -> tuple[Tensors, Extras]:
    """Adaption prompt (LLaMA-Adapter; peft tuners/adaption_prompt, 0.21.2): an adaption_prompt [adapter_len, hidden]
    and a gate [1] in each of the last adapter_layers attention layers, and what one adapted layer keeps for backward:
    the query it computes again (RoPE'd), its fp32 softmax over the prompt's tokens, that cast back and its gated
    product per token, and the prompt's keys and values repeated to every head and sequence."""
    model_type = arch.peft_model_type or arch.model_type
    if model_type not in ("llama", "mistral"):  # config.py TRANSFORMERS_MODEL_CONFIG (gpt2's needs its own k_proj)
        raise SizingError("invalid_value", f"peft_type adaption_prompt supports model_type llama and mistral (PEFT "
                          f"0.21), not '{model_type}'", field="peft_type", value="adaption_prompt")
    if arch.hidden != arch.heads * arch.head_dim:  # layer.py views the prompt's keys as hidden / head_dim heads
        raise SizingError("invalid_value", f"peft_type adaption_prompt needs hidden_size = heads x head_dim (this "
                          f"model: {arch.hidden} vs {arch.heads} x {arch.head_dim}); PEFT's forward fails",
                          field="peft_type", value="adaption_prompt")
    layers = cfg.adapter_layers or arch.layers
    if layers > arch.layers:  # model.py: "Config specifies more adapter layers ... than the model has"
        raise SizingError("invalid_value", f"adapter_layers={layers} exceeds the model's {arch.layers} layers",
                          field="adapter_layers", value=layers, max=arch.layers)
    length, heads = cfg.adapter_len, arch.heads
    return ([(length, arch.hidden, layers), (1, 1, layers)],
            Extras(per_token=4 * heads * length, base_per_token=arch.q_width + 2 * heads * length,
                   per_sequence=2 * heads * length * arch.head_dim))


def norm_tensors(arch: Architecture) -> Tensors:
    """LN tuning: a trainable copy of every hidden-width norm's weight (and bias), per layer and the final one;
    PEFT's Llama mapping (input_layernorm, post_attention_layernorm, norm) leaves Qwen3's q_norm/k_norm out."""
    per = (arch.pre_norms + arch.post_norms) * arch.layers + arch.outer_norms
    return [(1, arch.hidden, per * (2 if arch.norm_bias else 1))]


@dataclass(frozen=True)
class Extras:
    """What a tuner's layers keep for backward beyond the walk of its LoRA shape (or of the frozen base), per decoder
    layer; each measured on CPU against PEFT 0.21.2 (tests/physics/test_peft_methods.py: byte-exact, bf16 base)."""

    rank: int | None = None  # the walk's adapter intermediate width when the tuner has none (None: r)
    dense: int = 0  # elements of out x in (and like) tensors kept, in the compute dtype under autocast, else adapter's
    per_token: int = 0  # bytes per token of fp32 tensors kept whatever autocast does
    fixed: int = 0  # bytes kept whatever the tokens and dtypes
    assembled: int = 0  # elements of adapter weights built each forward and kept by their matmuls (not under autocast)
    weight_sized: int = 0  # elements of weights built in the base weight's dtype each forward and kept (GLoRA, AdaMSS)
    copies_input: bool = True  # False: the adapter's matmul reads the layer input as it is (GLoRA), no fp32 copy
    autocast_copied: int = 0  # elements of trained factors autocast copies for a matmul (GLoRA's Xd @ Xu)
    buffers: int = 0  # elements of frozen tensors the tuner stores in the adapters' dtype (PSOFT's, TinyLoRA's A, B)
    index_bytes: int = 0  # bytes of its int64 index buffers (UniLoRA's, PSOFT's)
    base_per_token: int = 0  # elements per token kept in the base weight's dtype, the compute dtype under autocast
    per_sequence: int = 0  # elements per sequence of the micro-batch kept in that dtype (adaption prompt's keys)
    weight_buffers: int = 0  # elements of frozen tensors the tuner stores in the base weight's dtype (FRoD's U)
    host_copied: int = 0  # elements in the base dtype of tensors it holds in CPU memory, copied to the GPU each
    host_bytes: int = 0  # forward and kept for backward (FRoD's basis V); bytes of such int64 indices
    resid_per_token: int = 0  # elements per token kept in the residual stream's dtype (trained RMSNorm weights)


def saved_extras(cfg: RunConfig, targets: tuple[Linear, ...]) -> Extras:
    """The run's tuner's Extras on the adapted linears `targets` of one decoder layer."""
    kind, r = cfg.peft_type, cfg.r
    modules = sum(lin.count for lin in targets)
    outs = sum(lin.out_features * lin.count for lin in targets)
    ins = sum(lin.in_features * lin.count for lin in targets)
    products = sum(lin.in_features * lin.out_features * lin.count for lin in targets)
    if kind == "road":  # its fp32 output and that output's rotated half (tuners/road/layer.py _apply_road) per token;
        # four fp32 out-wide vectors (the alpha * cos / sin columns its multiplies read)
        return Extras(per_token=8 * outs, fixed=16 * outs)
    if kind == "waveft":  # F.linear(x cast to the spectrum's fp32, dense update) keeps that copy of x (LoRA's, no
        # r-wide intermediate); the update and the wavelet coefficients it came from, db1's 2 x 2 filter for 4 subbands
        # and its index bookkeeping (a bool mask and two int64 position vectors of n_frequency each)
        return Extras(rank=0, dense=2 * products + 16 * modules, fixed=17 * (cfg.n_frequency or 0) * modules)
    if kind == "fourierft":  # LoRA's fp32 input copy (no r-wide intermediate), the dense update ifft2 made from the
        # spectrum [out, in], and the two int64 index vectors that placed it
        return Extras(rank=0, dense=products, fixed=16 * (cfg.n_frequency or 0) * modules)
    if kind in ("vblora", "unilora"):  # lora_A [r, in] and lora_B [out, r] built each forward (autocast: bf16 copies,
        # walked as LoRA's); VB-LoRA's top-k mix: k gathered fp32 bank rows per entry, int64 indices and fp32 weights
        # per sub-vector
        entries = r * (ins + outs)
        mix = 4 * cfg.topk * entries + 12 * cfg.topk * entries // cfg.vector_length if kind == "vblora" else 0
        # UniLoRA's scales (the adapters' dtype) and int64 indices per entry are buffers
        return Extras(fixed=mix, assembled=entries, buffers=entries if kind == "unilora" else 0,
                      index_bytes=8 * entries if kind == "unilora" else 0)
    if kind == "deft":  # its fp32 output and (output @ relu(P)) per token (beyond LoRA's x copy and x @ R^T, or the
        # frozen base's under PaRa); relu(P) [out, r] and R * scaling [r, in] rebuilt each forward
        return Extras(per_token=4 * (outs + r * modules), assembled=r * outs + (0 if cfg.deft_para else r * ins))
    if kind == "lily":  # the router's softmax per token; the num_B-mixed B [r, out] and the mix weights per layer
        return Extras(per_token=4 * cfg.num_B * modules, fixed=4 * r * outs + 4 * cfg.num_B * modules)
    if kind == "glora":  # F.linear(x, W + W * A + B) keeps x as it is and that effective weight [out, in]
        lora = cfg.config_A_B == "lora"
        return Extras(rank=0, weight_sized=products, copies_input=False,
                      autocast_copied=2 * r * (ins + outs) if lora else 0)
    if kind == "tinylora":  # the rank r' = min(r, in, out) R [r', r'] built from v and P each forward; its frozen
        # SVD factors A [r', in], B [out, r'] and projections P [u, r', r'] are buffers
        rr = min([r, *(min(lin.in_features, lin.out_features) for lin in targets)])
        return Extras(rank=rr, fixed=4 * rr * rr * modules,
                      buffers=rr * (ins + outs) + cfg.tinylora_u * rr * rr * modules)
    if kind == "psoft":  # x @ A^T [tokens, r] (A and B are frozen SVD buffers); the Cayley solve keeps five r x r
        # matrices and an r-vector (measured with psoft_orth and both scales, the defaults);
        # A [r, in], B [out, r] and the skew matrix's two int64 index vectors are buffers
        return Extras(fixed=4 * (5 * r * r + r) * modules, buffers=r * (ins + outs),
                      index_bytes=16 * (r * (r - 1) // 2) * modules if cfg.psoft_orth else 0)
    if kind == "peanut":  # x's fp32 copy (no r-wide intermediate); W.T in fp32 and the dense update from it, and
        # 1 + 3 depth [in, r] activations of the weight
        return Extras(rank=0, dense=2 * products + (1 + 3 * cfg.depth) * r * ins)
    if kind == "adamss":  # F.linear(x, newB) keeps nothing of x (newB is a frozen buffer); the projection [tokens,
        # r_e] and each subspace's output [tokens, R] are kept, with the copies of newB, A_i and B_i cast to the base
        # dtype (autocast's under autocast). newB [r_e, in (+1 with a bias)] is a buffer in the adapters' dtype. The
        # scatter keeps its int64 index [out] for backward: a plain dict entry PEFT never moves, so on a GPU a copy
        # made each forward
        sizes = [(lin, *_adamss(cfg, lin)) for lin in targets]
        return Extras(base_per_token=sum((rank + ke * sub) * lin.count for lin, rank, ke, sub in sizes), fixed=8 * outs,
                      weight_sized=sum((rank * (lin.in_features + lin.bias) + ke * sub * rank + sub * lin.out_features)
                                       * lin.count for lin, rank, ke, sub in sizes),
                      buffers=sum(rank * (lin.in_features + lin.bias) * lin.count for lin, rank, _, _ in sizes))
    # Measured on CPU with a bf16 base and fp32 adapters (tests/physics/test_peft_methods.py OUTPUT_SIDE):
    if kind == "adalora":  # LoRA's, plus lora_A * lora_E [r, in] and the scaled update [tokens, out] (out_saved)
        return Extras(assembled=r * ins, fixed=4 * modules)
    if kind == "oft":  # x cast and split into r blocks (LoRA's input copy, no r-wide intermediate); the Cayley solve of
        # r blocks of (in / r)^2: four fp32 tensors
        return Extras(rank=0, fixed=16 * sum(lin.in_features * (lin.in_features // r) * lin.count for lin in targets))
    if kind == "shira":  # F.linear(x as it is, W + sparse delta): the new weight in the base dtype, the delta's COO
        # (int64 indices, fp32 values) of r * (in + out) entries
        return Extras(rank=0, copies_input=False, weight_sized=products, fixed=20 * r * (ins + outs))
    if kind == "hra":  # LoRA's input copy; the r Householder factors multiplied into an fp32 in x in product one by
        # one, each step's kept (r + 1 of them), the reflected weight twice, the normalised vectors
        return Extras(rank=0, fixed=4 * sum(((r + 1) * lin.in_features ** 2 + 2 * lin.out_features * lin.in_features
                                             + 2 * r * lin.in_features + r) * lin.count for lin in targets))
    if kind == "delora":  # LoRA's, a second r-wide fp32 intermediate (the normalised one), six r-vectors and a scalar
        return Extras(per_token=4 * r * modules, fixed=(24 * r + 4) * modules)
    if kind == "hira":  # LoRA's input copy and the dense Hadamard weight W * (B @ A) [out, in]
        return Extras(rank=0, dense=products)
    if kind == "randlora":  # x meets frozen random bases (not kept); the min(in, out)-wide intermediate per token and
        # a min x min product
        mins = [min(lin.in_features, lin.out_features) for lin in targets for _ in range(lin.count)]
        return Extras(rank=0, per_token=4 * sum(mins), fixed=4 * sum(m * m for m in mins))
    if kind == "c3a":  # LoRA's input copy (split into blocks for the FFT), no r-wide intermediate
        return Extras(rank=0)
    if kind == "loha":  # F.linear(x cast to the adapters' dtype, delta): LoRA's input copy (no r-wide intermediate)
        # and the dense delta [out, in] the Hadamard product of its two factor pairs builds; a 0-d scale per module
        return Extras(rank=0, dense=products, fixed=4 * modules)
    if kind == "lokr":  # likewise the Kronecker delta [out, in]; a decomposed w2 (r below half its larger side, as
        # _lokr's tensors) keeps its product w2_a @ w2_b [out_k, in_n] too
        kept = 0
        for lin in targets:
            _, out_k = factorization(lin.out_features, cfg.decompose_factor)
            _, in_n = factorization(lin.in_features, cfg.decompose_factor)
            kept += out_k * in_n * lin.count if r < max(out_k, in_n) / 2 else 0
        return Extras(rank=0, dense=products, assembled=kept)
    if kind == "miss" and cfg.miss_init == "mini":  # the block repeated out / mini_r times, kept by its matmul
        return Extras(assembled=r * outs)
    if kind == "miss" and cfg.miss_init == "bat":  # F.linear(x cast to the block's dtype, W + delta): LoRA's input
        # copy (no r-wide intermediate), the weight W cast to that dtype and reshaped into r x r blocks (kept by W @
        # block) and the whole updated weight [out, in], both in the block's dtype
        return Extras(rank=0, dense=2 * products)
    if kind == "boft":  # x @ rotation keeps x as it is and the rotation; the frozen base's output, scaled by boft_s,
        # is kept per token in x's dtype (16-bit here); per adapted layer three in x in tensors in that dtype (the block
        # diagonal cast to x, the permuted product, the rotation it multiplies), the Cayley solve of in/4 blocks of 4 x
        # 4 (three fp32 tensors and int32 pivots: 52 in bytes) and the scale's out-wide ones (16-bit) and product (fp32)
        return Extras(rank=0, copies_input=False, base_per_token=outs,
                      weight_sized=3 * sum(lin.in_features ** 2 * lin.count for lin in targets),
                      fixed=52 * ins + 6 * outs)
    if kind == "frod":  # z = x @ V per token (V frozen: x not kept), S densified from its coalesced COO (values and
        # int64 indices) and lambda's cast, in x's 16-bit dtype; the base layer is skipped. U [out, in] per module
        # is a buffer in the base dtype, unless runtime_offload_base_weight moves W to the CPU for it (same size). The
        # basis V [in, in] and S's indices stay in CPU memory (plain references PEFT never moves): copies each forward
        nnz = [_frod_nnz(lin.in_features, cfg.sparse_rate) * lin.count for lin in targets]
        squares = sum(lin.in_features ** 2 * lin.count for lin in targets)
        return Extras(base_per_token=ins, weight_sized=squares + ins, fixed=20 * sum(nnz),
                      weight_buffers=0 if cfg.runtime_offload_base_weight else products,
                      host_copied=squares, host_bytes=16 * sum(nnz))
    return Extras()
