"""Model names as measurement tables write them ("Llama-3-8B", "Mistral 7B v0.1", "Phi-3 mini", "unsloth/llama-3-8b")
read into tokens, and the catalog records whose names those tokens fit (scripts/row_catalog.py picks among them).

A name is read without its organisation and parenthesised comments, lower-cased, into
* words: family and model-line words ("llama", "code", "mini", "distill"), which must agree both ways;
* tuned words (instruct, chat, it, sft, ...) and base words: a fine-tune of the same weights' shape (soft);
* generation: a bare number right after a family word ("llama-2", "qwen2.5", "phi-3", "starcoder2"), which must
  agree both ways (a name without one is the first generation: "StarCoder" is not StarCoder2);
* numbers: other versions and numbers ("0.2" from "v0.2", "2407", "4k", "3t", alpha / beta), which the written
  name may leave out;
* sizes: "7b", "0.135b" (135M), "7.1b" (bloom's 7b1), "8x7b", "a3b" (active experts);
* quantization markers of a pre-quantized checkpoint (gptq, awq, int4, gguf, ...), which must agree both ways.
Format and uploader words (hf, fp16, meta, unsloth, ...) are dropped.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# Words a name may carry or omit without naming other weights: checkpoint formats, uploaders, descriptions.
NOISE = frozenset({"hf", "fp16", "bf16", "fp32", "float16", "bfloat16", "float32", "meta", "model", "the", "original",
                   "pytorch", "safetensors", "weights", "checkpoint", "unsloth", "thebloke", "nousresearch",
                   "lora", "qlora", "dora", "peft", "nf4", "fp4", "4bit", "8bit", "16bit", "moe"})
# Releases tuned from the same base keep its tensors (the catalog's sibling rule); "base" names the base itself.
TUNED = frozenset({"instruct", "instruction", "chat", "it", "sft", "dpo", "rlhf", "orpo"})
BASE = frozenset({"base", "pretrained", "pt"})
# Release qualifiers read as version numbers: zephyr-7b-beta, stablelm-base-alpha-3b.
QUALIFIERS = frozenset({"alpha", "beta", "gamma", "preview"})
# Pre-quantized checkpoint formats: the name of such a checkpoint only matches a record of that format.
QUANT = frozenset({"gptq", "awq", "int4", "int8", "int3", "gguf", "ggml", "exl2", "aqlm", "hqq", "fp8", "mxfp4"})
# Encoder-decoder (sequence-to-sequence) families, by the word their checkpoints are named with.
ENCODER_DECODER = frozenset({"t5", "mt5", "umt5", "byt5", "longt5", "codet5", "codet5p", "t0", "t0pp", "mt0", "bart",
                             "mbart", "ul2", "pegasus", "nllb", "m2m100", "t5gemma", "flan-t5", "flan-ul2"})

_SIZE = re.compile(r"(\d+(?:\.\d+)?)([bm])(\d*)")  # 7b, 135m, 1.1b, 7b1 (BLOOM's 7.1B)


@dataclass(frozen=True)
class Name:
    """A model name read into token classes."""

    words: frozenset[str]
    tuned: frozenset[str]
    base: bool
    generation: frozenset[str]
    numbers: frozenset[str]
    sizes: frozenset[str]
    quant: frozenset[str]
    bnb_bits: int | None  # "-bnb-4bit": a bitsandbytes checkpoint (uploaded already quantized)


def checkpoint_id(text: str) -> str:
    """A model column without its comments: parenthesised / bracketed text and what follows , ; or |
    ("meta-llama/Llama-2-7b (llama2_7b)" -> "meta-llama/Llama-2-7b")."""
    t = re.sub(r"\([^)]*\)|\[[^\]]*\]", " ", text)
    return re.split(r"[,;|]", t)[0].strip()


def checkpoint_name(text: str) -> str:
    """The name part of a model column: checkpoint_id without the organisation ("meta-llama/Llama-2-7b")."""
    t = checkpoint_id(text)
    return t.rsplit("/", 1)[-1].strip() if "/" in t else t


def encoder_decoder_word(name: str) -> str | None:
    """The sequence-to-sequence family a checkpoint name starts a word with (flan-t5-xl, T0_3B, mt0-xxl, bart)."""
    raw = name.lower()
    for fam in sorted(ENCODER_DECODER, key=len, reverse=True):
        if re.search(rf"(?<![a-z0-9]){re.escape(fam)}(?![a-z0-9])", raw):
            return fam
    return None


def _size(value: str, unit: str, tail: str) -> str:
    billions = float(value) / (1000 if unit == "m" else 1)
    if tail:  # 7b1, 1b7: the digits after the unit are tenths
        billions = float(f"{value}.{tail}") / (1000 if unit == "m" else 1)
    return f"{billions:g}b"


def _number(text: str) -> str:
    """A version without trailing .0 ("1.0" -> "1", "3.0" -> "3") so v1 and v1.0 agree."""
    while re.search(r"\.0$", text) and text.count(".") >= 1:
        text = text[:-2]
    return text


def parse(text: str) -> Name:
    """The tokens of a name (a catalog id, alias or display name, or a model column's name part)."""
    t = text.lower()
    bnb = re.search(r"bnb[-_ ]?(4|8)[-_ ]?bits?", t)
    t = re.sub(r"(?<=\d)_(?=\d)", ".", t)  # Qwen-1_8B, phi-1_5, internlm2_5
    t = re.sub(r"(\d+)[-_ ]bits?\b", r"\1bit", t)  # "8-bit" -> 8bit (a noise word)
    words: set[str] = set()
    tuned: set[str] = set()
    generation: set[str] = set()
    numbers: set[str] = set()
    sizes: set[str] = set()
    quant: set[str] = set()
    base = False
    after_word = False  # the last token read was a family word: a bare number next is its generation
    for raw in re.split(r"[^a-z0-9.]+", t):
        raw = raw.strip(".")
        if not raw or raw in NOISE or raw == "bnb":
            continue
        was_after, after_word = after_word, False
        if raw in QUANT:
            quant.add(raw)
            continue
        moe = re.fullmatch(r"(\d+)x(\d+(?:\.\d+)?)b", raw)
        if moe:
            sizes.add(f"{moe.group(1)}x{float(moe.group(2)):g}b")
            continue
        if re.fullmatch(r"a\d+(?:\.\d+)?b", raw):
            sizes.add(raw)
            continue
        size = _SIZE.fullmatch(raw)
        if size:
            sizes.add(_size(*size.groups()))
            continue
        ver = re.fullmatch(r"v(\d+(?:\.\d+)*)", raw)
        if ver:
            numbers.add(_number(ver.group(1)))
            continue
        # a word glued to its version ("llama3", "qwen2.5", "gpt2", "r1"), or a number with a unit ("4k", "3t")
        for part in re.findall(r"[a-z]+|\d+(?:\.\d+)*[a-z]*", raw):
            if part[0].isdigit():
                # a generation is small ("2", "3.5"); "2407" after a word is a date release
                gen = was_after and part[-1].isdigit() and float(part.split(".")[0]) < 100
                (generation if gen else numbers).add(_number(part))
                was_after = False
                continue
            was_after = False
            if part in NOISE:
                continue
            if part in TUNED:
                tuned.add(part)
            elif part in BASE:
                base = True
            elif part in QUALIFIERS:
                numbers.add(part)
            else:
                words.add(part)
                was_after = after_word = True
    return Name(frozenset(words), frozenset(tuned), base, frozenset(generation), frozenset(numbers),
                frozenset(sizes), frozenset(quant), int(bnb.group(1)) if bnb else None)


def size_billions(size: str) -> float | None:
    """A plain size token's value ("7b" -> 7.0); None for "8x7b" / "a3b"."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)b", size)
    return float(m.group(1)) if m else None


@dataclass(frozen=True)
class Fit:
    """How a record's name fits a written name: tier (lower is closer) and, within a tier, the order to pick by."""

    tier: tuple[int, int, int]  # (tuned words not covered, sizes matched approximately, record states more: 0/1)
    extra_tuned: int  # tuned words the record has and the written name does not (a base release ranks first)


def written_as(size: str, stated: float) -> bool:
    """Whether a written size is a stated one written with its digits ("15b" for 15.5B, "22b" for 22B; not "24b")."""
    value = size_billions(size)
    if value is None:
        return False
    digits = len(size[:-1].partition(".")[2])
    scale = 10.0**digits
    low, high = math.floor(stated * scale + 1e-9) / scale, math.ceil(stated * scale - 1e-9) / scale
    return low - 1e-9 <= value <= high + 1e-9


def fit(written: Name, record: Name, counted_billions: float, stated: tuple[float, ...] = ()) -> Fit | None:
    """Whether a record's name covers a written name, and how closely; None when it names other weights.

    Family words, generations and quantization markers must agree; the written numbers must be among the
    record's; a written size must be one of the record's (within 2 %: bloom-7b1 is "7B"), or, where the record's
    name has no size, the size another of its names states (``stated``: "Mistral Small 22B Instruct (2409)" for
    Mistral-Small-Instruct-2409) written with fewer digits, else, where none states one, within 10 % of its counted
    parameters. A tuned word the record lacks makes it a sibling (same architecture, other weights)."""
    if written.words != record.words or written.quant != record.quant or written.generation != record.generation:
        return None
    if not written.numbers <= record.numbers:
        return None
    inexact = 0
    plain = [v for v in map(size_billions, record.sizes) if v is not None]
    written_plain = [s for s in written.sizes if size_billions(s) is not None]
    for size in written.sizes:
        if size in record.sizes:
            continue
        value = size_billions(size)
        if value is not None and any(abs(value - p) <= 0.02 * p for p in plain):
            inexact += 1
        elif value is not None and not plain and stated:
            if not any(written_as(size, p) for p in stated):
                return None  # the record's other name states another size: Mistral Small 24B is not the 22B release
        elif value is not None and not plain and abs(value - counted_billions) <= 0.10 * counted_billions:
            continue  # no name of the record states a size: its counted parameters confirm the written one
        else:
            return None
    extra_sizes = {s for s in record.sizes if size_billions(s) is None} - written.sizes
    if not written_plain:
        extra_sizes |= {s for s in record.sizes if size_billions(s) is not None}
    missed = len(written.tuned - record.tuned) + (1 if written.base and record.tuned else 0)
    extra = bool(record.numbers - written.numbers or extra_sizes)  # a name that states less: any extra alike
    return Fit((missed, inexact, int(extra)), len(record.tuned - written.tuned))
