"""The printed range's statistics (scripts/residual_bands.py, validate_range.py, sizing/uncertainty.py) against
brute-force counts made here: weighted quantiles by expanding weights into repeated rows, coverage by counting
rows inside each range, leave-one-source-out by checking that a row's range ignores its own source."""
from __future__ import annotations

import json
import math
import random
import sys
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from residual_bands import COVERAGE, MIN_ROWS, MIN_SOURCES, Residual, build_groups, weighted_quantile  # noqa: E402
from sizing import estimate  # noqa: E402
from sizing.uncertainty import HIGH_SOURCES, REASONS, band, confidence, reason_text  # noqa: E402
from validate import Scored  # noqa: E402
from validate import _scored as _scored_row  # noqa: E402
from validate_range import attach_loso, row_range  # noqa: E402


def _brute_quantile(values_counts: list[tuple[float, int]], q: float) -> float:
    """Nearest-rank quantile of the values each repeated `count` times."""
    flat = sorted(v for v, c in values_counts for _ in range(c))
    return flat[max(0, math.ceil(q * len(flat)) - 1)]


@pytest.mark.parametrize("seed", range(20))
def test_weighted_quantile_equals_the_quantile_of_repeated_rows(seed: int) -> None:
    rng = random.Random(seed)
    counts = [(rng.uniform(-1, 1), rng.randint(1, 5)) for _ in range(rng.randint(1, 12))]
    total = sum(c for _, c in counts)
    for q in (0.1, 0.5, 0.8, 0.9):
        dist = [(v, c / total) for v, c in counts]
        assert weighted_quantile(dist, q) == _brute_quantile(counts, q)


def _rows(rng: random.Random, n_sources: int, tier: str = "reserved", method: str = "lora",
          multi: bool = False) -> list[Residual]:
    out = []
    for s in range(n_sources):
        bias = rng.uniform(0.85, 1.15)
        out += [Residual(f"R{s}-{i}", f"S{s}", method, tier, multi, bias * rng.uniform(0.95, 1.05))
                for i in range(rng.randint(1, 8))]
    return out


@pytest.mark.parametrize("seed", range(10))
def test_one_regime_band_holds_its_share_of_the_source_weight(seed: int) -> None:
    # One regime whose parents hold the same rows: the band must hold >= COVERAGE of the weight when every
    # source weighs the same, counted here row by row with exact fractions.
    rows = _rows(random.Random(seed), n_sources=5)
    g = build_groups(rows)["lora/reserved/single"]
    per_source: dict[str, int] = {}
    for r in rows:
        per_source[r.source] = per_source.get(r.source, 0) + 1
    inside = sum((Fraction(1, len(per_source) * per_source[r.source]) for r in rows
                  if g["low"] - 1e-4 <= r.ratio <= g["high"] + 1e-4), Fraction(0))
    assert inside >= Fraction(COVERAGE).limit_denominator(100)
    assert g["low"] <= 1.0 <= g["high"] and g["sources"] == 5 and g["n"] == len(rows)


def test_a_source_of_thirty_rows_does_not_outvote_two_others() -> None:
    # 30 rows of one harness at 0.9, one row each from two others at 1.2: a row-count quantile would centre on
    # 0.9; balanced by source, two thirds of the weight is at 1.2, so the band must reach it.
    rows = [Residual(f"A{i}", "A", "lora", "reserved", False, 0.9) for i in range(30)]
    rows += [Residual("B0", "B", "lora", "reserved", False, 1.2), Residual("C0", "C", "lora", "reserved", False, 1.2)]
    g = build_groups(rows)["reserved"]
    assert g["high"] >= 1.2 - 1e-4 and g["low"] <= 0.9 + 1e-4


def test_a_regime_of_one_source_or_two_rows_prints_its_parents_band() -> None:
    # A regime of 2 rows from one source at 1.00/1.01 inside a tier of 5 sources spread over 0.8-1.25: alone it
    # would print +-1 %; it must print the tier's band instead (MIN_ROWS, MIN_SOURCES).
    rng = random.Random(3)
    rows = [*_rows(rng, 4, method="full"), Residual("Q1", "Q", "qlora", "reserved", False, 1.0),
            Residual("Q2", "Q", "qlora", "reserved", False, 1.01), Residual("W1", "W", "full", "reserved", False, 0.8),
            Residual("W2", "W", "full", "reserved", False, 1.25)]
    groups = build_groups(rows)
    assert MIN_ROWS > 2 and MIN_SOURCES > 1 and "qlora/reserved/single" not in groups
    lo, hi, key = band("qlora", "reserved", False, groups)
    assert key == "reserved/single" and (lo, hi) == (groups[key]["low"], groups[key]["high"])
    assert hi - lo > 0.1


def _scored(source: str, measured: float, est: float, tier: str = "reserved") -> Scored:
    return Scored(f"{source}-{measured}", source, "lora", tier, 1, measured, est, framework="custom",
                  low_gib=0.0, high_gib=0.0, alloc_gib=est, reserved_gib=est, device_extra_gib=(0.3, 0.65))


def test_leave_one_source_out_ranges_ignore_the_rows_own_source_and_count_right() -> None:
    rng = random.Random(7)
    scored = [_scored(f"S{s}", rng.uniform(9.0, 11.5), 10.0) for s in range(6) for _ in range(rng.randint(1, 4))]
    attach_loso(scored)
    # brute force: rebuild each row's range from the other sources only, here, and compare
    for s in scored:
        others = [Residual(o.row_id, o.source, o.method, o.metric, False, o.measured_gib / o.estimated_gib)
                  for o in scored if o.source != s.source and o.measured_gib is not None]
        assert (s.loso_low_gib, s.loso_high_gib) == pytest.approx(row_range(s, build_groups(others)))
    # a row's own source can change without moving its own range
    first = scored[0]
    moved = [replace(o, measured_gib=o.measured_gib * 3) if o.source == first.source and o is not first else o
             for o in scored]
    moved[0] = replace(first)
    attach_loso(moved)
    assert (moved[0].loso_low_gib, moved[0].loso_high_gib) == pytest.approx((first.loso_low_gib, first.loso_high_gib))
    inside = sum(1 for s in scored if s.loso_low_gib <= s.measured_gib <= s.loso_high_gib)
    assert sum(s.covered_loso for s in scored) == inside


def test_device_range_is_the_reserved_band_plus_the_context_spread() -> None:
    s = _scored("S0", 11.0, 10.0, tier="device")
    groups = {"reserved": {"n": 9, "sources": 3, "low": 0.9, "high": 1.2, "error": 0.05}}
    assert row_range(s, groups) == pytest.approx((10.0 * 0.9 + 0.3, 10.0 * 1.2 + 0.65))


def test_confidence_is_high_only_with_a_small_error_from_enough_sources() -> None:
    small = {"n": 30, "sources": HIGH_SOURCES, "low": 0.97, "high": 1.03, "error": 0.02}
    assert confidence(small, ()) == ("high", [])
    few = {**small, "sources": HIGH_SOURCES - 1}
    assert confidence(few, ())[0] == "medium" and "few_sources" in confidence(few, ())[1]
    assert confidence({**small, "error": 0.06}, ())[0] == "medium"
    assert confidence({**small, "error": 0.2}, ())[0] == "low"
    assert confidence(small, ("moe",)) == ("low", ["moe"])
    assert confidence(small, ("shape_matched",))[0] == "medium"
    assert confidence(None, ())[0] == "low" and "regime_unmeasured" in confidence(None, ())[1]


def test_every_reason_reads_in_three_languages() -> None:
    for code, words in REASONS.items():
        assert set(words) == {"ru", "uz", "en"}, code
        for lang in ("ru", "uz", "en"):
            text = reason_text(code, lang, 0.061)
            assert text and "{" not in text, (code, lang)
    assert "6 %" in reason_text("regime_error", "en", 0.061)


def test_the_estimate_says_why_its_label_is_not_higher() -> None:
    est = estimate({"model": "meta-llama/Llama-3.1-8B", "method": "qlora", "load_in_4bit": True, "bf16": True,
                    "gpu": "L40S-48GB", "num_gpus": 2, "parallelism": "fsdp"}).to_dict()
    unc = est["uncertainty"]
    assert unc["confidence"] in ("high", "medium", "low")
    if unc["confidence"] != "high":
        assert unc["reasons"] and all(r["code"] in REASONS and r["message"] for r in unc["reasons"])
    lo, hi, key = band("qlora", "reserved", True)
    assert key and lo <= 1.0 <= hi


@pytest.mark.parametrize("lang", ["ru", "uz", "en"])
def test_the_page_gives_the_reasons_in_its_language(lang: str) -> None:
    from sizing import web
    from sizing.view import results_view

    # transformers 4.x: an nn.ModuleList of nn.Linear experts, not measured op by op (the "moe" gap)
    moe = {"model": "mistralai/Mixtral-8x7B-v0.1", "method": "qlora", "load_in_4bit": True, "bf16": True,
           "gpu": "H100-SXM-80GB", "framework_version": "4.46.0"}
    answer = web.compute(moe)
    unc = answer["estimate"]["uncertainty"]
    assert unc["confidence"] == "low" and any(r["code"] == "moe" for r in unc["reasons"])
    block = next(b for b in results_view(answer, {}, lang)["blocks"] if b["key"] == "uncertainty")
    assert REASONS["moe"][lang] in block["parts"][0]["text"]


@pytest.mark.parametrize("tier", ["allocated", "reserved", "device", "unstated"])
def test_the_rebuilt_range_is_the_estimates_own_with_the_committed_groups(tier: str) -> None:
    # validate_range rebuilds a row's range from other groups; with the committed ones it must be the printed one
    groups = json.loads((ROOT / "sizing" / "data" / "residuals.json").read_text(encoding="utf-8"))["groups"]
    cfg = {"model": "meta-llama/Llama-3.1-8B", "method": "qlora", "load_in_4bit": True, "bf16": True,
           "gpu": "L40S-48GB", "framework": "custom"}
    for multi in (1, 2):
        s = _scored_row("R0", "S0", {**cfg, "num_gpus": multi, **({"parallelism": "ddp"} if multi > 1 else {})},
                             tier, 10.0, None)
        lo, hi = row_range(s, groups)
        assert lo == pytest.approx(s.low_gib, rel=1e-6) and hi == pytest.approx(s.high_gib, rel=1e-4), (tier, multi)


def test_unstated_checkpointing_is_a_reason_only_where_no_library_default_sets_it() -> None:
    base = {"model": "meta-llama/Llama-3.1-8B", "method": "lora", "bf16": True}

    def codes(cfg: dict[str, object]) -> list[str]:
        return [r["code"] for r in estimate(cfg).confidence_reasons]

    assert "checkpointing_unstated" in codes({**base, "framework": "custom"})
    assert "checkpointing_unstated" not in codes({**base, "framework": "custom", "gradient_checkpointing": False})
    assert "checkpointing_unstated" not in codes({**base, "framework": "transformers"})  # TrainingArguments: False
    assert "checkpointing_unstated" not in codes({**base, "framework": "trl"})  # SFTConfig: True
    assert estimate({**base, "framework": "custom"}).confidence in ("medium", "low")


def test_an_unknown_checkpoint_dtype_is_a_reason_only_where_dtype_auto_reads_the_weight_files() -> None:
    # transformers 5 from_pretrained: dtype defaults to "auto", which takes config.dtype and, without it, the first
    # floating-point weight's dtype (modeling_utils._get_dtype): a config.json without torch_dtype leaves it unknown
    tiny = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000, "max_position_embeddings": 512}
    base = {"model_config": tiny, "method": "lora", "bf16": True, "max_seq_length": 256}

    def codes(cfg: dict[str, object]) -> list[str]:
        return [r["code"] for r in estimate(cfg).confidence_reasons]

    assert "dtype_assumed" in codes(base)
    assert "dtype_assumed" in codes({**base, "framework": "custom"})
    assert estimate(base).confidence in ("medium", "low")
    assert "dtype_assumed" not in codes({**base, "torch_dtype": "float32"})  # stated by the user
    assert "dtype_assumed" not in codes({**base, "model_config": {**tiny, "torch_dtype": "float16"}})
    assert "dtype_assumed" not in codes({**base, "framework": "trl"})  # trl >= 0.27 loads float32 itself
    assert "dtype_assumed" not in codes({**base, "framework": "litgpt"})  # its own bf16 checkpoints


def test_a_window_mixed_with_full_layers_is_a_reason_only_where_sdpa_gets_the_window_mask() -> None:
    """Gemma 3 1B's window is 512 tokens (its config.json) and one layer in six is a full one: from 512 packed tokens
    under SDPA on the Hugging Face stack the window is a mask, which every layer is sized with (full ones included:
    slightly high, tests/physics/test_activations.py) and the reason says so, without lowering the label or
    widening the range. Not below the window, not with eager or FlashAttention-2, not for a padded batch, not for a
    model whose layers are all windowed (Phi-3 mini 4k: exact), nor for Qwen2.5 (use_sliding_window false)."""
    base = {"model": "google/gemma-3-1b-it", "method": "lora", "bf16": True, "packing": True,
            "max_seq_length": 1024}

    def codes(cfg: dict[str, object]) -> list[str]:
        return [r["code"] for r in estimate(cfg).confidence_reasons]

    assert "sliding_window" in codes(base) and "sliding_window" in codes({**base, "max_seq_length": 512})
    assert estimate(base).confidence == estimate({**base, "max_seq_length": 511}).confidence
    assert "sliding_window" not in codes({**base, "max_seq_length": 511})
    assert "sliding_window" not in codes({**base, "attn_implementation": "eager"})
    assert "sliding_window" not in codes({**base, "attn_implementation": "flash_attention_2"})
    assert "sliding_window" not in codes({**base, "packing": False})
    assert "sliding_window" not in codes({**base, "model": "microsoft/Phi-3-mini-4k-instruct", "max_seq_length": 4096,
                                         "target_modules": ["qkv_proj"]})
    assert "sliding_window" not in codes({**base, "model": "Qwen/Qwen2.5-7B"})


def test_a_trial_report_comparison_carries_the_labels_reasons() -> None:
    from sizing import report as trial_report

    data = {"schema_version": 1, "status": "ok", "message": "", "checks": {}, "rank": 0, "world_size": 1,
            "measurements": {"steps": [], "peaks": {}},
            "config": {"model": "meta-llama/Llama-3.1-8B", "method": "lora", "bf16": True, "framework": "custom"}}
    cmp = trial_report.compare(trial_report.parse_report(data))
    est = estimate(data["config"])
    assert cmp["confidence"] == est.confidence
    assert cmp["confidence_reasons"] == [r["message"] for r in est.confidence_reasons] and cmp["confidence_reasons"]
    assert all(r in trial_report.format_comparison(cmp) for r in cmp["confidence_reasons"])


@pytest.mark.parametrize(("gpu", "version", "gap"), [("H100-SXM-80GB", None, False), ("A100-SXM-80GB", "5.24.0", False),
                                                     ("H100-SXM-80GB", "4.46.0", True), ("V100-32GB", None, True)])
def test_moe_is_a_gap_unless_its_experts_are_the_measured_ones(gpu: str, version: str | None, gap: bool) -> None:
    # Transformers 5's fused experts under grouped_mm (sm80 and later) are what tests/physics/test_activations.py and
    # test_moe_weights.py measure; 4.x experts and transformers' fallback before sm80 are not
    cfg = {"model": "mistralai/Mixtral-8x7B-v0.1", "method": "lora", "gpu": gpu, "torch_dtype": "bfloat16",
           **({"framework_version": version} if version else {})}
    est = estimate(cfg).to_dict()
    codes = {r["code"] for r in est["uncertainty"]["reasons"]}
    warned = {w["code"] for w in est["warnings"]}
    assert ("moe" in codes, "moe_approximate" in warned) == (gap, gap)
    assert ("moe_fused_experts" in warned) == (version != "4.46.0")
