# Trainable parameters: LoRA/DoRA adapters (peft tuners/lora/layer.py::update_layer) or every weight.
from __future__ import annotations

from dataclasses import dataclass

from ..arch import ATTN_IN, MLP_IN, MLP_MID, Architecture, Linear, target_aliases
from ..config import RunConfig
from ..errors import SizingError
from ..frameworks import peft_release
from .peft_methods import (
    APPROXIMATE,
    IA3_DEFAULTS,
    LORA_SHAPED,
    OSF_DEFAULTS,
    default_targets,
    module_tensors,
    norm_tensors,
    osf_kept,
    prompt_tensors,
    widths_ok,
)
from .peft_saved import Extras, adaption_prompt, saved_extras
from .regime import Regime, adapter_dtype, load_dtype

LM_HEAD = "lm_head"
NO_EXTRAS = Extras()  # frozen: one shared default


@dataclass(frozen=True)
class Trainable:
    """Trainable tensors as (rows, cols, how many such tensors): optimizers decide per tensor (8-bit
    threshold, Adafactor factoring)."""

    targets: tuple[Linear, ...]  # adapted linears of one decoder layer (empty for full FT)
    lm_head: bool  # LoRA on the output head
    tensors: tuple[tuple[int, int, int], ...]
    approximate: str = ""  # why the activations of this PEFT method are not walked exactly ("" when they are)
    frozen_a: bool = False  # LoRA-FA: lora_A does not train (peft optimizers/lorafa.py create_lorafa_optimizer)
    idle: int = 0  # adapter parameters on the vision tower (shapes.Tower): stored, never given a gradient
    scaled: tuple[Linear, ...] = ()  # IA3: the modules whose output (or feed-forward input) ia3_l scales
    feedforward: tuple[Linear, ...] = ()  # IA3: those of `scaled` whose input it scales (feedforward_modules)
    inner: int = 0  # per-token width of the saved adapter intermediate when it is not r (GraLoRA: gralora_k * r)
    has_a: bool = True  # False for MiSS: no [r, in] matrix; its input is summed in blocks of r, which saves nothing
    out_saved: bool = False  # VeRA: lambda_b * (h @ vera_B^T) keeps that [tokens, out] product for lambda_b's gradient
    extras: Extras = NO_EXTRAS  # what the tuner's layers keep beyond its LoRA shape's walk (peft_methods)
    head_tokens: int = 0  # rows index-copied into a tied head's weight each forward (trainable tokens; 0: none)

    @property
    def params(self) -> int:
        return sum(r * c * k for r, c, k in self.tensors)


def lora_params(lin: Linear, r: int, dora: bool) -> int:
    """lora_A [r, in] + lora_B [out, r] (+ DoRA magnitude [out]); e.g. 4096x4096 at r=16 -> 131,072."""
    return lin.count * (r * (lin.in_features + lin.out_features) + (lin.out_features if dora else 0))


def _fused_pair(arch: Architecture) -> tuple[str, str] | None:
    """The (gate, up) expert names transformers 5 stores as one gate_up_proj parameter, if any."""
    experts = [lin.name for lin in arch.linears if lin.count > 1 and lin.feeds_from == MLP_IN]
    return (experts[0], experts[1]) if len(experts) == 2 else None


def resolve_targets(cfg: RunConfig, arch: Architecture) -> tuple[tuple[Linear, ...], bool]:
    """The adapted Linear modules of a layer, as PEFT would match them, and whether lm_head is adapted."""
    if cfg.method == "full":
        return (), False
    if cfg.peft_type == "osf":  # OSF wraps nn.Linear modules only (tuners/osf: a 2-D weight, dispatch_default):
        targets, head = _resolve_targets(cfg, arch)  # not transformers 5's fused experts or its routers
        wrapped = tuple(lin for lin in targets if lin.nn_linear)
        if targets and not wrapped:
            raise SizingError("target_not_linear", f"target_modules: {', '.join(lin.name for lin in targets)} are not "
                              "nn.Linear modules, which OSF wraps (it skips fused experts and routers): nothing "
                              "would train", field="target_modules", unknown=[lin.name for lin in targets])
        return wrapped, head
    return _resolve_targets(cfg, arch)


def _resolve_targets(cfg: RunConfig, arch: Architecture) -> tuple[tuple[Linear, ...], bool]:
    own_code = cfg.framework in ("litgpt", "torchtune")  # their MoE experts are nn.Linear modules
    # gpt-oss's experts and router are no nn.Linear and PEFT maps no v4 names onto them: PEFT finds no module of that
    # name ("Target modules ... not found") or refuses its type (GptOssTopKRouter is "not supported")
    reachable = tuple(lin for lin in arch.linears if lin.nn_linear or arch.experts_targetable or own_code)
    names = tuple(dict.fromkeys(lin.name for lin in reachable)) + (
        tuple(lin.name for lin in arch.tower.linears) if arch.tower else ())
    if isinstance(cfg.target_modules, str):  # "all-linear", the one string config._parse_targets keeps
        # PEFT: every nn.Linear except the output embedding. On a transformers-5 MoE model PEFT 0.21 adds the
        # router and the fused experts by their v4 names (utils/transformers_weight_conversion.py
        # _resolve_string_target_modules: "all-linear matched every nn.Linear on the v4 model").
        return reachable, False
    model_type = arch.peft_model_type or arch.model_type
    if cfg.target_modules is not None:
        wanted = cfg.target_modules
    elif cfg.peft_type == "osf":  # OSF's own mapping, all-linear for a model type it lacks; it names Llama's seven for
        mapped = OSF_DEFAULTS.get(model_type)  # Phi-2 and Mixtral too: PEFT adapts those the model has
        if mapped is None:
            return reachable, False
        wanted = tuple(n for n in mapped if n in names)
    else:
        wanted = default_targets(cfg.peft_type, model_type, arch.default_lora_targets)
    if not wanted:
        tuner = "" if cfg.peft_type == "lora" else f"{cfg.peft_type} "
        raise SizingError("target_modules_required",
                          f"PEFT has no default {tuner}target_modules for model_type "
                          f"'{model_type}': name them "
                          f"(this model has: {', '.join(names)})", field="target_modules", available=list(names))
    if own_code:
        # Their own model code: LitGPT / torchtune names (query, projection, mlp, w1...) by role.
        wanted = tuple(dict.fromkeys(m for n in wanted for m in (target_aliases(arch, n) or (n,))))
    bare = tuple(n.removeprefix("mlp.") for n in wanted)  # "mlp.c_proj": _named keeps the MLP's c_proj only
    unknown = [n for n in bare if n not in names and n != LM_HEAD]
    if unknown and set(unknown) <= set(arch.linear_names()):
        raise SizingError("target_not_linear", f"target_modules: {', '.join(unknown)} of model_type "
                          f"'{arch.model_type}' are not nn.Linear modules PEFT can adapt (it has: {', '.join(names)})",
                          field="target_modules", unknown=unknown, available=list(names))
    if unknown:
        raise SizingError("unknown_target_module",
                          f"target_modules: {', '.join(unknown)} not found in this model (it has: {', '.join(names)})",
                          field="target_modules", unknown=unknown, available=list(names))
    chosen = _named(reachable, wanted)
    pair = _fused_pair(arch)
    if pair and not own_code and (pair[0] in bare) != (pair[1] in bare):
        # PEFT 0.21 _convert_peft_config_moe: "Cannot convert PEFT target(s) ... because they are fused".
        raise SizingError("target_not_linear", f"target_modules: {pair[0]} and {pair[1]} are one fused gate_up_proj "
                          "parameter in transformers 5: target both or neither", field="target_modules",
                          unknown=[n for n in pair if n not in bare])
    return chosen, LM_HEAD in bare


def trainable(cfg: RunConfig, arch: Architecture) -> Trainable:
    """Trainable tensors of the run: LoRA A/B (+ DoRA magnitude) per adapted module, or every weight."""
    if cfg.method == "full":
        return Trainable((), False, _all_tensors(arch))
    kind = cfg.peft_type
    if kind in ("prompt_tuning", "prefix_tuning", "p_tuning"):
        prompt = prompt_tensors(kind, arch, cfg.num_virtual_tokens, cfg.encoder_hidden_size)
        return Trainable((), False, tuple(prompt), APPROXIMATE[kind])
    if kind == "trainable_tokens":  # trainable_tokens_delta [tokens, hidden] on the input embedding; a tied lm_head
        # shares it (tuners/trainable_tokens/model.py), so it too runs on an index_copy of the whole weight
        return Trainable((), False, ((cfg.num_trainable_tokens, arch.hidden, 1),), APPROXIMATE[kind],
                         head_tokens=cfg.num_trainable_tokens if arch.tied_embeddings else 0)
    if kind == "ln_tuning":  # a trained RMSNorm weight makes its multiply keep the normalised input too
        norms = arch.hidden * (arch.pre_norms + arch.post_norms) if arch.norm == "rms" else 0
        return Trainable((), False, tuple(norm_tensors(arch)), APPROXIMATE[kind], extras=Extras(resid_per_token=norms))
    if kind == "adaption_prompt":  # whole attention layers wrapped, no Linear adapted: the frozen base's walk
        prompt, extras = adaption_prompt(cfg, arch)
        return Trainable((), False, tuple(prompt), APPROXIMATE[kind], extras=extras)
    targets, head = resolve_targets(cfg, arch)
    if kind not in ("lora", "lora_fa"):
        return _other(cfg, arch, kind, targets, head)
    r = cfg.r
    widths = [min(lin.in_features, lin.out_features) for lin in targets]
    if head:
        widths.append(arch.hidden)
    # PEFT (tuners/lora/layer.py update_layer) only requires r > 0: a rank above one layer's width (the
    # 8-wide Mixtral router) is legal. Refused only above every adapted layer's width: no layer would
    # then be low-rank, and the config is almost surely a typo.
    if widths and r > max(widths):
        raise SizingError("rank_too_large", f"r={r} exceeds the width of every targeted layer (at most {max(widths)})",
                          field="r", value=r, max=max(widths))
    tensors: list[tuple[int, int, int]] = []
    pair = _fused_pair(arch) if cfg.framework not in ("litgpt", "torchtune") else None
    fused = pair is not None and {lin.name for lin in targets} >= set(pair)
    for lin in targets:
        n = arch.layers * lin.count
        if fused and pair is not None and lin.name in pair:
            if lin.name == pair[0]:
                # transformers 5 gate_up_proj [E, 2I, h] under PEFT's ParamWrapper at rank 2r (rank_pattern):
                # lora_A [E * 2r, h], lora_B [2I, E * 2r] per layer (measured in tests/physics).
                tensors += [(lin.count * 2 * r, lin.in_features, arch.layers),
                            (2 * lin.out_features, lin.count * 2 * r, arch.layers)]
            continue
        tensors += [(r, lin.in_features, n), (lin.out_features, r, n)] if kind == "lora" else [(lin.out_features, r, n)]
        if cfg.use_dora:
            tensors.append((1, lin.out_features, n))
    if head:
        tensors += [(r, arch.hidden, 1), (arch.vocab, r, 1)] if kind == "lora" else [(arch.vocab, r, 1)]
        if cfg.use_dora:
            tensors.append((1, arch.vocab, 1))
    return Trainable(targets, head, tuple(tensors), frozen_a=kind == "lora_fa", idle=_tower_adapters(cfg, arch))


def _tower_adapters(cfg: RunConfig, arch: Architecture) -> int:
    """LoRA parameters PEFT puts on the vision tower's linears: all-linear and target names match them as they
    match the language model's (q_proj, k_proj, v_proj; tuners_utils._maybe_include_all_linear_layers)."""
    tower = arch.tower
    if tower is None:
        return 0
    wanted = arch.default_lora_targets if cfg.target_modules is None else cfg.target_modules
    return tower.layers * sum(lora_params(lin, cfg.r, cfg.use_dora) for lin in tower.linears
                              if cfg.target_modules == "all-linear" or lin.name in wanted)


def _osf_ranks_ok(cfg: RunConfig, targets: tuple[Linear, ...]) -> None:
    """OSF keeps at least one singular direction of each adapted layer frozen: update_layer refuses an effective_rank
    of 0 or less (tuners/osf/layer.py), which osf_trainable_rank at or above a layer's smaller side would give."""
    bad = [lin for lin in targets if osf_kept(cfg, lin) <= 0]
    if not bad:
        return
    side = min(min(lin.in_features, lin.out_features) for lin in bad)
    if cfg.osf_trainable_rank is not None:
        raise SizingError("invalid_value", f"osf_trainable_rank={cfg.osf_trainable_rank} leaves no frozen direction "
                          f"in {', '.join(lin.name for lin in bad)}: it must be below {side}, the smaller side",
                          field="osf_trainable_rank", value=cfg.osf_trainable_rank)
    raise SizingError("invalid_value", f"effective_rank={cfg.effective_rank} keeps no singular direction of "
                      f"{', '.join(lin.name for lin in bad)} frozen; PEFT refuses it", field="effective_rank",
                      value=cfg.effective_rank)


def _other(cfg: RunConfig, arch: Architecture, kind: str, targets: tuple[Linear, ...], head: bool) -> Trainable:
    """A per-module tuner (AdaLoRA, VeRA, LoHa, LoKr, OFT, BOFT, IA3, MiSS, GraLoRA, SHiRA, HRA, DeLoRA, HiRA,
    FourierFT, RandLoRA, PVeRA, C3A, BEFT, RoAd, WaveFT, VB-LoRA, UniLoRA, DEFT, Lily, PEANuT, TinyLoRA, GLoRA, PSOFT,
    AdaMSS, FRoD, OSF)
    on the resolved target modules."""
    if head:
        raise SizingError("target_not_linear", f"target_modules: lm_head is modelled for LoRA only, not {kind}",
                          field="target_modules", unknown=[LM_HEAD])
    bad = [lin.name for lin in targets if not widths_ok(kind, lin, cfg.r)]
    if bad:
        need = {"oft": "divide the input width", "shira": "keep r * (in + out) within in * out",
                "psoft": "be at most the input and output widths"}.get(kind, "be at most the input width")
        most = min(lin.in_features * lin.out_features // (lin.in_features + lin.out_features) if kind == "shira"
                   else min(lin.in_features, lin.out_features) if kind == "psoft" else lin.in_features
                   for lin in targets)
        raise SizingError("rank_too_large", f"r={cfg.r} must {need} of {', '.join(bad)} for {kind}",
                          field="r", value=cfg.r, max=most)
    if kind == "miss" and cfg.miss_init == "bat" and any(lin.in_features % cfg.r or lin.out_features % cfg.r
                                                          for lin in targets):
        raise SizingError("invalid_value", f"miss_init bat needs r={cfg.r} to divide the input and output widths of "
                          "every targeted layer (its r x r blocks; tuners/miss/layer.py)", field="r", value=cfg.r)
    if kind == "miss" and cfg.miss_init == "mini" and any(lin.out_features % cfg.mini_r for lin in targets):
        raise SizingError("invalid_value", f"mini_r={cfg.mini_r} must divide the output width of every targeted "
                          "layer (tuners/miss/layer.py)", field="mini_r", value=cfg.mini_r)
    k = cfg.gralora_k
    if kind == "gralora" and (cfg.r % k or any(lin.in_features % k or lin.out_features % k for lin in targets)):
        # tuners/gralora/layer.py update_layer (in and out) and forward's view into k blocks of r // k (r)
        raise SizingError("invalid_value", f"gralora_k={k} must divide r ({cfg.r}) and the input and output widths "
                          "of every targeted layer", field="gralora_k", value=k)
    if kind in ("fourierft", "waveft") and any((cfg.n_frequency or 0) > lin.in_features * lin.out_features
                                                for lin in targets):
        # tuners/{fourierft,waveft}/layer.py update_layer: the frequencies are positions in the out x in weight
        raise SizingError("invalid_value", f"n_frequency={cfg.n_frequency} exceeds in x out of a targeted layer "
                          f"({min(lin.in_features * lin.out_features for lin in targets)})", field="n_frequency",
                          value=cfg.n_frequency)
    b = cfg.block_size
    if kind == "c3a" and any(lin.in_features % b or lin.out_features % b for lin in targets):
        # tuners/c3a/layer.py update_layer: the block size divides the input and the output width
        raise SizingError("invalid_value", f"block_size={b} must divide the input and output widths of every "
                          "targeted layer", field="block_size", value=b)
    length = cfg.vector_length
    if kind == "vblora" and any(lin.in_features % length or lin.out_features % length for lin in targets):
        # tuners/vblora/layer.py update_layer: the bank's vectors tile each layer's input and output
        raise SizingError("invalid_value", f"vector_length={length} must divide the input and output widths of every "
                          "targeted layer", field="vector_length", value=length)
    if kind == "vblora" and cfg.topk > cfg.num_vectors:  # logits.topk(topk) over num_vectors fails in the forward
        raise SizingError("invalid_value", f"topk={cfg.topk} exceeds num_vectors ({cfg.num_vectors})", field="topk",
                          value=cfg.topk)
    g = cfg.group_size
    if kind == "road" and (g % 2 or any(lin.out_features % g for lin in targets)):
        # tuners/road/config.py (group_size even) and layer.py update_layer (it divides out_features)
        raise SizingError("invalid_value", f"group_size={g} must be even and divide the output width of every "
                          "targeted layer", field="group_size", value=g)
    if kind == "osf" and arch.model_type == "gpt2":  # GPT-2's projections are Conv1D, which OSF's dispatch skips
        raise SizingError("invalid_value", "peft_type osf adapts nn.Linear layers only; GPT-2's are Conv1D, so PEFT "
                          "wraps none and nothing trains (tuners/osf/layer.py dispatch_default)", field="peft_type",
                          value="osf")
    if kind == "osf":
        _osf_ranks_ok(cfg, targets)
    ff = _feedforward(cfg, arch, targets) if kind == "ia3" else ()
    tensors: list[tuple[int, int, int]] = []
    for lin in targets:
        tensors += module_tensors(cfg, lin, arch.layers * lin.count, lin in ff)
    if kind == "lily":
        tensors += _lily(cfg, arch, targets)
    if kind == "tinylora":  # tinylora_v [u] per group of tied layers (tuners/tinylora/model.py: Python's round)
        groups = max(1, round(arch.layers * sum(lin.count for lin in targets) * (1.0 - cfg.weight_tying)))
        tensors.append((1, cfg.tinylora_u, groups))
    if kind == "vblora":
        tensors.append((cfg.num_vectors, cfg.vector_length, 1))  # vblora_vector_bank, shared by every layer
    if kind == "unilora":
        tensors.append((1, cfg.theta_d_length, 1))  # unilora_theta_d: the model's one trainable vector
    if kind == "ia3":
        return Trainable((), False, tuple(tensors), scaled=targets, feedforward=ff)
    shaped = targets if kind in LORA_SHAPED else ()
    # MiSS saves what LoRA-FA saves (the r-wide block sum, not its input); VeRA too (its vera_A is a frozen buffer,
    # whose autocast copy is kept as LoRA-FA's lora_A's) and the out-wide product lambda_b scales; GraLoRA what LoRA
    # saves, its intermediate k * r wide (tests/physics/test_peft_methods.py, byte-exact)
    vera_like = kind in ("vera", "pvera")  # PVeRA: VeRA's frozen shared A and B, approximate (APPROXIMATE)
    if kind == "deft" and cfg.deft_para:
        shaped = ()  # PaRa has no R: x is not multiplied by anything trained, so not kept
    bat = kind == "miss" and cfg.miss_init == "bat"  # a whole updated weight, not the block sum: x is kept
    # AdaLoRA's update / ranknum keeps the update when ranknum needs a gradient: from PEFT 0.21.1 the cast of 16-bit
    # adapter weights to fp32 makes every float parameter of its ParameterDicts a new, trainable one (tuners_utils.py
    # cast_adapter_dtype reassigns them; 0.21.0 cast .data in place), the frozen ranknum included (measured, both
    # releases: tests/physics/test_peft_methods.py)
    recast = kind == "adalora" and not cfg.quantized and (load := load_dtype(cfg, arch)) != "float32" \
        and adapter_dtype(cfg, load) != load and peft_release(cfg) >= (0, 21, 1)
    return Trainable(shaped, False, tuple(tensors), APPROXIMATE["miss_bat"] if bat else APPROXIMATE.get(kind, ""),
                     frozen_a=vera_like or (kind in ("miss", "tinylora", "psoft", "randlora") and not bat),
                     # GraLoRA's intermediate is k r wide; PVeRA keeps its 2r-wide sample and its two r-wide halves
                     inner=k * cfg.r if kind == "gralora" else 4 * cfg.r if kind == "pvera" else 0,
                     has_a=kind != "miss", out_saved=vera_like or recast,
                     extras=saved_extras(cfg, targets))


def _lily(cfg: RunConfig, arch: Architecture, targets: tuple[Linear, ...]) -> list[tuple[int, int, int]]:
    """Lily (tuners/lily/model.py _post_injection_hook): per target name, one lily_A [r, in] per stride_A consecutive
    layers and one lily_B [num_B * r, out] for all of them; a router [num_B, r] in every adapted layer."""
    out: list[tuple[int, int, int]] = []
    for lin in targets:
        n = arch.layers * lin.count
        out += [(cfg.r, lin.in_features, -(-n // cfg.stride_A)), (cfg.num_B * cfg.r, lin.out_features, 1),
                (cfg.num_B, cfg.r, n)]
    return out


def _feedforward(cfg: RunConfig, arch: Architecture, targets: tuple[Linear, ...]) -> tuple[Linear, ...]:
    """IA3's feed-forward modules among the targets: feedforward_modules, else PEFT's per-model mapping (peft
    tuners/ia3/model.py _prepare_adapter_config raises without either; IA3Config wants them among target_modules)."""
    names = cfg.feedforward_modules
    mapped = arch.peft_model_type or arch.model_type  # the model_type PEFT's mappings are keyed by
    if names is None:
        if mapped not in IA3_DEFAULTS:
            raise SizingError("feedforward_modules_required", f"PEFT has no default IA3 feedforward_modules for "
                              f"model_type '{mapped}': name them (a subset of target_modules)",
                              field="feedforward_modules")
        names = IA3_DEFAULTS[mapped][1]
    if isinstance(names, str):  # "all-linear", the one string config._parse_targets keeps
        raise SizingError("invalid_value", "feedforward_modules must name modules, not all-linear",
                          field="feedforward_modules", value=names)
    if cfg.feedforward_modules is not None and isinstance(cfg.target_modules, tuple) \
            and not {n.removeprefix("mlp.") for n in names} <= set(cfg.target_modules):
        raise SizingError("invalid_value", "feedforward_modules must be a subset of target_modules (IA3Config)",
                          field="feedforward_modules", value=list(names))
    return _named(targets, names)


def _named(linears: tuple[Linear, ...], names: tuple[str, ...]) -> tuple[Linear, ...]:
    """The linears PEFT matches by these names. "mlp.X" (PEFT's IA3 defaults for GPT-2, BLOOM) is X of the MLP: GPT-2's
    MLP c_proj, not its attention's, as PEFT's name-ending match on "mlp.c_proj" picks."""
    bare = {n.removeprefix("mlp.") for n in names}
    mlp_only = {n.removeprefix("mlp.") for n in names if n.startswith("mlp.")}
    return tuple(lin for lin in linears if lin.name in bare and (lin.name not in mlp_only or lin.feeds_from == MLP_MID))


def approximate(cfg: RunConfig, arch: Architecture, reg: Regime) -> str:
    """Why this run's PEFT activations are not walked exactly ("" when they are). MiSS, GraLoRA and VeRA end with
    result.to(previous_dtype), the input's dtype, where LoRA keeps the base output's: under autocast over 32-bit
    (or the other 16-bit) weights, an adapted q/gate/up returns fp32 and what reads it saves fp32 copies (measured
    in tests/physics/test_peft_methods.py; the walk keeps LoRA's dtypes), except for q/k/v alone."""
    tr = trainable(cfg, arch)
    if not tr.approximate and cfg.peft_type in ("miss", "gralora", "vera") and cfg.method != "full" and reg.autocast \
            and not reg.quant and reg.weight != reg.compute \
            and any(lin.feeds_from != ATTN_IN for lin in tr.targets):
        # q/k/v alone measured byte-exact: their fp32 outputs go into the rotary and attention, which autocast
        # casts; gate/up (and, by 128 B per token, o/down) were not
        return (f"{cfg.peft_type} returns its input's dtype under autocast, so the outputs of adapted MLP layers are "
                f"saved in {8 * reg.weight}-bit; the walk keeps LoRA's dtypes")
    return tr.approximate


def _all_tensors(arch: Architecture) -> tuple[tuple[int, int, int], ...]:
    L = arch.layers
    out: list[tuple[int, int, int]] = [(arch.vocab, arch.hidden, 1)]
    if arch.position_params:
        out.append((arch.position_params // arch.hidden, arch.hidden, 1))
    if not arch.tied_embeddings:
        out.append((arch.vocab, arch.hidden, 1))
    norm_tensors = (arch.pre_norms + arch.post_norms) * L + arch.outer_norms
    out.append((1, arch.hidden, norm_tensors * (2 if arch.norm_bias else 1)))
    if arch.attn_sinks:
        out.append((1, arch.heads, L))
    if arch.qk_norm_whole:
        out += [(1, arch.q_width, L), (1, arch.kv_width, L)]
    elif arch.qk_norm:
        out.append((1, arch.head_dim, 2 * L))
    for lin in arch.linears:
        out.append((lin.out_features, lin.in_features, L * lin.count))
        if lin.bias:
            out.append((1, lin.out_features, L * lin.count))
    if arch.lm_head_bias and not arch.tied_embeddings:
        out.append((1, arch.vocab, 1))
    return tuple(out)
