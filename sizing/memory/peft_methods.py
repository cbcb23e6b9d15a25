# Trainable tensors of the PEFT tuners other than LoRA/DoRA, from peft 0.21.2 tuners/<name>/layer.py.
from __future__ import annotations

from ..arch import Architecture, Linear
from ..config import RunConfig

Tensors = list[tuple[int, int, int]]  # (rows, cols, how many), as adapters.Trainable.tensors

# Why a tuner's activations are not walked exactly (the estimate says confidence "low" and this): most are now its
# LoRA shape's (or the frozen base's) walk plus terms measured on CPU (peft_saved.saved_extras), whose temporaries
# and other dtypes are not walked.
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
    "osf": "OSF's saved tensors are modelled from CPU measurements with a 16-bit base (PEFT 0.21: its input's copy, "
           "a product twice the trained rank wide per token and the two factors it concatenates each forward; before "
           "0.21, from PEFT's source, the whole weight rebuilt from the SVD factors each forward); the gradient "
           "projection's backward temporaries and the SVD at load are not counted",
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


# OSF's own mapping (TRANSFORMERS_MODELS_TO_OSF_TARGET_MODULES_MAPPING); a model type it lacks gets all-linear
# (tuners/osf/model.py _prepare_adapter_config: INCLUDE_LINEAR_LAYERS_SHORTHAND): adapters.resolve_targets
_SEVEN = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "down_proj", "up_proj")
OSF_DEFAULTS = {**dict.fromkeys(("llama", "llama4", "mistral", "mixtral", "gemma", "gemma2", "gemma3_text", "qwen2",
                                 "qwen3", "phi"), _SEVEN),
                "gpt2": ("c_attn", "c_proj"), "bloom": ("query_key_value", "dense_4h_to_h"),
                "opt": ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"),
                "gptj": ("q_proj", "k_proj", "v_proj", "out_proj", "fc_in", "fc_out"),
                "gpt_neox": ("query_key_value", "dense_4h_to_h"), "falcon": ("query_key_value", "dense_4h_to_h"),
                "gpt_bigcode": ("c_attn", "c_proj")}


def default_targets(kind: str, model_type: str, lora: tuple[str, ...]) -> tuple[str, ...]:
    """PEFT's target_modules for `kind` when none are given (empty: PEFT has none for this model type); OSF's:
    OSF_DEFAULTS."""
    if kind == "ia3":
        return IA3_DEFAULTS.get(model_type, ((), ()))[0]
    if kind == "beft":
        return ("v_proj",) if model_type in BEFT_DEFAULTS else ()
    return _OWN_DEFAULTS.get(kind, {}).get(model_type, lora)


# Tuners whose layers are LoRA-shaped in the activation walk (sizing/memory/activations.py, rank r).
LORA_SHAPED = ("lora", "lora_fa", "adalora", "vera", "loha", "lokr", "oft", "boft", "miss", "gralora", "shira", "hra",
               "delora", "hira", "randlora", "pvera", "c3a", "waveft", "fourierft", "vblora", "unilora", "lily",
               "peanut", "deft", "tinylora", "glora", "psoft", "osf")


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
        rank, groups, sub = adamss_sizes(cfg, lin)
        return [(sub, rank, groups * k), (o, sub, k)]
    if kind == "frod":  # frod_lambda_l [in] and frod_lambda_s_values [nnz] (tuners/frod/layer.py update_layer)
        return [(1, i, k), (1, frod_nnz(i, cfg.sparse_rate), k)]
    if kind == "osf":  # U_low [out, t], S_low [t], V_low [t, in]: the t trained singular directions
        t = min(i, o) - osf_kept(cfg, lin)
        return [(o, t, k), (1, t, k), (t, i, k)]
    if kind == "ia3":  # ia3_l: [1, in] on a feed-forward module, else [out, 1]
        return [(1, i if feedforward else o, k)]
    raise ValueError(kind)


def osf_kept(cfg: RunConfig, lin: Linear) -> int:
    """OSF's effective_rank on `lin`: the top singular directions it keeps frozen (tuners/osf/model.py _resolve_rank,
    0.21.2): half the smaller side by default, an int as it is, a fraction below 1 of the smaller side, capped at that
    side; osf_trainable_rank t instead keeps all but t of them (PEFT's benchmark: rank_pattern). 0 or less is refused
    (adapters._other), as update_layer does."""
    side = min(lin.in_features, lin.out_features)
    if cfg.osf_trainable_rank is not None:
        return side - cfg.osf_trainable_rank
    value = cfg.effective_rank
    if value is None:
        return side // 2
    return max(min(side, int(side * value) if 0 < value < 1 else int(value)), 0)


def frod_nnz(width: int, rate: float) -> int:
    """FRoD's trained off-diagonal entries of S [width, width] (tuners/frod/model.py _init_frod_projection_buffers)."""
    off = width * width - width
    nnz = min(int(width * width * rate), off)
    return max(1, nnz) if rate > 0 and off > 0 else nnz


def adamss_sizes(cfg: RunConfig, lin: Linear) -> tuple[int, int, int]:
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


def norm_tensors(arch: Architecture) -> Tensors:
    """LN tuning: a trainable copy of every hidden-width norm's weight (and bias), per layer and the final one;
    PEFT's Llama mapping (input_layernorm, post_attention_layernorm, norm) leaves Qwen3's q_norm/k_norm out."""
    per = (arch.pre_norms + arch.post_norms) * arch.layers + arch.outer_norms
    return [(1, arch.hidden, per * (2 if arch.norm_bias else 1))]
