# The calculator page's Python API: what its Web Worker (Pyodide) and the site build call.
"""The same module runs under CPython (the site build renders the default configuration with it) and
under Pyodide in the page's Web Worker (it ships in the `sizing` wheel), so both show the same numbers.

Input and output are JSON text, so nothing but strings crosses the JS/Python boundary.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from . import SizingError, estimate, load_config
from .catalog import gpus, model_records, resolve_architecture
from .config import RunConfig, config_to_dict
from .ladder import ladder
from .memory.weights import checkpoint_method
from .report import compare as compare_report
from .report import load_report
from .solve import fit_table, row_entry
from .view import own_gpu_fits, results_view


def _finite(value: Any) -> Any:
    """JSON that JavaScript's JSON.parse accepts: no NaN or Infinity."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


def model_limits(model: str) -> dict[str, Any]:
    """What a catalog model fixes, as the engine refuses it: the longest max_seq_length (its
    max_position_embeddings; None: no limit) and the only method its pre-quantized checkpoint trains with
    (None: any). The form adapts its defaults to them when the model is picked."""
    arch, _ = resolve_architecture(model, None)
    return {"max_seq_length": arch.max_positions or None, "method": checkpoint_method(arch)}


def catalog() -> dict[str, Any]:
    """Models (with their model_limits) and GPUs for the form's select boxes."""
    return {
        "models": [{"id": r["id"], "name": r.get("name", r["id"]), **model_limits(r["id"])} for r in model_records()],
        "gpus": [{"id": g.id, "name": g.name, "memory_bytes": g.memory_bytes} for g in gpus().values()],
    }


def _py(value: Any) -> str:
    return repr(tuple(value) and list(value)) if isinstance(value, (list, tuple)) else repr(value)


def snippet(cfg: dict[str, Any]) -> str:
    """The Hugging Face setup of a normalised configuration, ready to run: BitsAndBytesConfig, the model
    load, prepare_model_for_kbit_training, LoraConfig + get_peft_model, TrainingArguments."""
    dtype = {"bfloat16": "torch.bfloat16", "float16": "torch.float16", "float32": "torch.float32", "auto": '"auto"'}
    quantized = bool(cfg.get("load_in_4bit") or cfg.get("load_in_8bit"))
    prepare = quantized and bool(cfg.get("prepare_model_for_kbit_training"))
    peft_names = ["LoraConfig", "get_peft_model"] + (["prepare_model_for_kbit_training"] if prepare else [])
    hf_names = ["AutoModelForCausalLM", "TrainingArguments"] + (["BitsAndBytesConfig"] if quantized else [])
    lines = ["# transformers 5.24, peft 0.21, bitsandbytes 0.50 (the trial recipe's versions)", "import torch"]
    if cfg.get("method") != "full":
        lines.append(f"from peft import {', '.join(sorted(peft_names))}")
    lines += [f"from transformers import {', '.join(sorted(hf_names))}", ""]
    if cfg.get("load_in_4bit"):
        lines += ["bnb_config = BitsAndBytesConfig(", "    load_in_4bit=True,",
                  f"    bnb_4bit_quant_type={_py(cfg.get('bnb_4bit_quant_type'))},",
                  f"    bnb_4bit_use_double_quant={_py(bool(cfg.get('bnb_4bit_use_double_quant')))},",
                  f"    bnb_4bit_compute_dtype={dtype.get(str(cfg.get('bnb_4bit_compute_dtype')), 'torch.float32')},",
                  ")", ""]
    elif cfg.get("load_in_8bit"):
        lines += ["bnb_config = BitsAndBytesConfig(load_in_8bit=True)", ""]
    model = cfg.get("model") or "path/to/your/model"  # a pasted config.json: the checkpoint it describes
    lines += ["model = AutoModelForCausalLM.from_pretrained(", f"    {_py(model)},",
              f"    dtype={dtype.get(str(cfg.get('torch_dtype')), 'torch.bfloat16')},",
              f"    attn_implementation={_py(cfg.get('attn_implementation'))},"]
    lines += ["    quantization_config=bnb_config,", ")"] if quantized else [")"]
    if "prepare_model_for_kbit_training" in peft_names and cfg.get("method") != "full":
        lines.append("model = prepare_model_for_kbit_training(model)  # also turns gradient checkpointing on")
    if cfg.get("method") != "full":
        lines += ["", "lora_config = LoraConfig(", f"    r={_py(cfg.get('r'))},",
                  f"    lora_alpha={_py(cfg.get('lora_alpha'))},", f"    lora_dropout={_py(cfg.get('lora_dropout'))},",
                  f"    target_modules={_py(cfg.get('target_modules'))},",
                  f"    use_dora={_py(bool(cfg.get('use_dora')))},", '    task_type="CAUSAL_LM",', ")",
                  "model = get_peft_model(model, lora_config)"]
    lines += ["", "training_args = TrainingArguments(", '    output_dir="out",',
              f"    per_device_train_batch_size={_py(cfg.get('per_device_train_batch_size'))},",
              f"    gradient_accumulation_steps={_py(cfg.get('gradient_accumulation_steps'))},",
              f"    num_train_epochs={_py(cfg.get('num_train_epochs'))},",
              f"    bf16={_py(bool(cfg.get('bf16')))},", f"    fp16={_py(bool(cfg.get('fp16')))},",
              f"    activation_checkpointing={_py(bool(cfg.get('gradient_checkpointing')))},"
              "  # gradient_checkpointing before transformers 5",
              f"    optim={_py(cfg.get('optim'))},", ")",
              f"# Sequences of up to {cfg.get('max_seq_length')} tokens, "
              + ("packed into full blocks" if cfg.get("packing") else "padded to the longest in each batch")
              + f": with TRL, SFTConfig(max_length={cfg.get('max_seq_length')}, packing={bool(cfg.get('packing'))}).",
              ""]
    return "\n".join(lines)


# Fit tables already computed, by normalised configuration: fit_table (a few thousand estimates, about 0.6 s
# in the browser) is a pure function of the configuration. The build computes the default configuration's
# table before taking the worker's memory snapshot, so a page opened on the defaults answers at once.
_TABLES: dict[tuple[str, bool], list[dict[str, Any]]] = {}
_TABLES_MAX = 32


def _memo(cache: dict[Any, Any], key: Any, make: Callable[[], Any]) -> Any:
    """A copy of cache[key], made by make() the first time; the oldest entry goes past _TABLES_MAX (the page's
    worker lives as long as the tab). A copy: the callers' answers are edited after they leave."""
    got = cache.get(key)
    if got is None:
        got = make()
        if len(cache) >= _TABLES_MAX:
            cache.pop(next(iter(cache)))
        cache[key] = got
    return copy.deepcopy(got)


def _fit_table(cfg: Any, searches: bool = True) -> list[dict[str, Any]]:
    key = repr(cfg)  # every field, the frozen dataclass's own repr

    def make() -> list[dict[str, Any]]:
        # the page's third answer: the second's verdicts, fewest GPUs and times, with the searches added. Read, not
        # copied: fit_table builds new rows from them, and _memo hands every caller its own copy of either table.
        return fit_table(cfg, searches, _TABLES.get((key, False)) if searches else None)

    return _memo(_TABLES, (key, searches), make)  # type: ignore[no-any-return]


# Ladders already climbed, by normalised configuration (a few dozen estimates; the page asks twice per change).
_LADDERS: dict[str, dict[str, Any]] = {}


def _ladder(cfg: Any) -> dict[str, Any]:
    return _memo(_LADDERS, repr(cfg), lambda: dataclasses.asdict(ladder(cfg, cfg.gpu)))  # type: ignore[no-any-return]


# Estimates already made, by normalised configuration: the page asks twice per change (the peak, then with the
# fit table) and the build once per language of a prerendered link (scripts/sitebuild/prerender.py).
_ESTIMATES: dict[tuple[str, bool], dict[str, Any]] = {}


def _estimate(cfg: Any, searches: bool = True) -> dict[str, Any]:
    return _memo(_ESTIMATES, (repr(cfg), searches),  # type: ignore[no-any-return]
                 lambda: estimate(cfg, searches=searches).to_dict())


def _with_table(cfg: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """_estimate(cfg) from the peak's estimate and the fit table: the estimate's own-GPU fit entry is fit_row of
    the same configuration on that card, which the table's row for it holds (solve.fit_table: largest, confirmed),
    and nothing else differs (estimate(searches=False)); this saves the own GPU's searches a second time."""
    def make() -> dict[str, Any]:
        got = _estimate(cfg, False)
        own = [row for row in rows if got["fits"] and row["gpu"] == got["fits"][0]["gpu"]]
        if got["fits"] and not own:
            return estimate(cfg).to_dict()  # a card outside the table (none today): the estimate's own search
        got["fits"] = [row_entry(row) for row in own]
        return got

    return _memo(_ESTIMATES, (repr(cfg), True), make)  # type: ignore[no-any-return]


def _answered(answer: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """{"ok": True, **answer()}, or the refusal as data: a SizingError with its code, anything else the
    input can provoke as code "internal"."""
    try:
        out = {"ok": True, **answer()}
    except SizingError as err:
        out = {"ok": False, "error": err.to_dict()}
    except (RecursionError, MemoryError, OverflowError, TypeError, ValueError, KeyError) as err:
        out = {"ok": False, "error": {"code": "internal", "field": None, "message": f"{type(err).__name__}: {err}",
                                      "params": {}}}
    return _finite(out)  # type: ignore[no-any-return]


def compute(data: Any, table: bool = True, words: Mapping[str, Any] | None = None,
            peak: bool = False, searches: bool = True) -> dict[str, Any]:
    """The estimate, the fit table over every catalog GPU (None when `table` is false: the page shows the
    peak first, the table about half a second later), with it the ladder of sizing.ladder when the run does
    not fit its GPU (else None), and the snippet; or the SizingError as data. With the page's `words`
    ({"lang", "text"}) the answer also holds the results view the page only has to place. peak (no table):
    the estimate's own-GPU fit entry without its largest micro-batch and longest sequence, which the view does
    not show (estimate(searches=False): about ten replays fewer; the fit table's row has them). searches=False
    (with the table): the table's verdicts, fewest GPUs and times without the largest micro-batch and longest
    sequence of each card, the estimate as with peak, and no ladder yet (the page's second answer)."""
    def answer() -> dict[str, Any]:
        cfg = data if isinstance(data, RunConfig) else load_config(data)
        rows = _fit_table(cfg, searches) if table else None
        # the table's searches give the estimate its own card's; without them it is the peak answer's
        est = _with_table(cfg, rows) if rows is not None and searches else _estimate(cfg, not (peak or table))
        lad = _ladder(cfg) if table and searches and cfg.gpu and not own_gpu_fits(est) else None
        out = {"estimate": est, "fit_table": rows, "ladder": lad, "snippet": snippet(config_to_dict(cfg))}
        if words is not None:
            out["view"] = results_view(out, words["text"], str(words["lang"]))
        return out

    return _answered(answer)


@functools.lru_cache(maxsize=4)
def _words(text: str) -> dict[str, Any]:
    """The page's words, parsed once per page (the worker passes the same text with every request)."""
    data = json.loads(text)
    if not (isinstance(data, dict) and isinstance(data.get("text"), dict) and isinstance(data.get("lang"), str)):
        raise ValueError('words must be {"lang": "...", "text": {...}}')
    return data


# Answers computed ahead with this same code, by (normalised configuration, table, words): the site build
# keeps the form's default configuration's answers in the page's memory snapshot (remember()), so a visitor's
# first answer is there as soon as the runtime is up, instead of one estimate and one fit table later.
_REMEMBERED: dict[tuple[str, bool, str], str] = {}


@functools.lru_cache(maxsize=4)
def _words_key(text: str) -> str:
    return json.dumps(_words(text), sort_keys=True)


def _loaded(data: Any) -> RunConfig | None:
    """The configuration, or None when it does not load (compute() then reports why; never remembered)."""
    try:
        return load_config(data)
    except (SizingError, RecursionError, MemoryError, OverflowError, TypeError, ValueError, KeyError):
        return None


def _key(cfg: RunConfig, table: bool, words: str | None) -> tuple[str, bool, str]:
    """What an answer depends on."""
    whole = [config_to_dict(cfg), cfg.extra]  # extra too: a key never merges two configurations
    return json.dumps(whole, sort_keys=True, default=repr), table, _words_key(words) if words else ""


def compute_json(text: str, table: bool = True, words: str | None = None, peak: bool = False,
                 searches: bool = True) -> str:
    """compute() over JSON text (what the worker sends); `words` the page's words as JSON text. A remembered
    answer without the table also answers the peak, and one with it the table without its searches (each holds
    more: the own GPU's searches, the table's)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as err:
        result = {"ok": False, "error": {"code": "bad_json", "field": "model_config", "message": str(err)[:200],
                                         "params": {}}}
        return json.dumps(result)
    cfg = _loaded(data) if _REMEMBERED else None
    if cfg is not None:
        answer = _REMEMBERED.get(_key(cfg, table, words))
        if answer is not None:
            return answer
        data = cfg  # loaded once: compute() takes the RunConfig as it is
    return json.dumps(compute(data, table, _words(words) if words else None, peak, searches), allow_nan=False)


def remember(text: str, table: bool = True, words: str | None = None) -> str:
    """compute_json(), kept: the same configuration, table flag and words get this answer from then on."""
    answer = compute_json(text, table, words)
    cfg = _loaded(json.loads(text))
    if cfg is not None:
        _REMEMBERED[_key(cfg, table, words)] = answer
    return answer


def report_json(text: str) -> str:
    """A trial report (JSON text) against the estimate of the configuration it ran: the comparison and that
    configuration (the page loads it into the form), or the SizingError as data."""
    def answer() -> dict[str, Any]:
        rep = load_report(text)
        return {"comparison": compare_report(rep), "config": dict(rep.config)}

    return json.dumps(_answered(answer), allow_nan=False)
