"""A published measurement row's model and GPU columns matched to the sizing catalog (scripts/validate_rows.py).

A model column names a catalog id, an alias, a checkpoint without its organisation, a display name, or records
by its name tokens (row_names.py: "Llama-3-8B", "Phi-3 mini", a chat / instruct sibling); a gpu_model column
names a card by nvidia-smi's name or by its model words, memory and form factor. What is taken as what is
returned as an assumption; a model the catalog lacks, or a name that fits several architectures, is refused.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import cache

from row_columns import COUNT_AFTER, RowRefused
from row_names import Name, checkpoint_id, checkpoint_name, encoder_decoder_word, fit, parse, size_billions
from sizing.arch import from_hf_config
from sizing.catalog import gpus, model_records, models


def model_id(text: str) -> str:
    """The checkpoint id: the first word of the column ("org/name (comment)" -> "org/name")."""
    words = text.strip().split()
    return words[0] if words else ""


def catalog_model(text: str, size_hint: str = "") -> tuple[str, str | None]:
    """The catalog id a model column names: a one-word name (its comments aside) as an id or alias, else that
    word without the organisation, else the column as a display name (each only when it names one model), else
    the records whose name tokens fit it (scripts/row_names.py): the closest tier of them, only when they share
    one architecture. size_hint (the row's params_nominal) stands in for a size the name does not state."""
    written = checkpoint_id(text)
    word = written if " " not in written else ""  # "gpt2 medium" is not gpt2, "Phi-4 mini" not phi-4
    if word.lower() in models():
        return word, None
    base = word.lower().rsplit("/", 1)[-1]
    by_base = {rec.id for key, rec in models().items() if base and key.rsplit("/", 1)[-1] == base}
    by_name = {rec.id for rec in models().values() if rec.name.lower() == re.sub(r"\s*\(.*", "", text).strip().lower()}
    for found in (by_base, by_name):
        if len(found) == 1:
            rid = found.pop()
            return rid, f"model '{text}' taken as catalog {rid}"
    return _by_tokens(text, size_hint)


def _by_tokens(text: str, size_hint: str) -> tuple[str, str | None]:
    name = checkpoint_name(text)
    seq2seq = encoder_decoder_word(name)
    if seq2seq:
        raise RowRefused("row_encoder_decoder_unsupported", f"model '{text}' is an encoder-decoder ({seq2seq}) model; "
                         "only decoder-only LMs are modelled")
    if re.search(r"unsloth[-_ ]bnb[-_ ]?4[-_ ]?bit", name.lower()):
        # Unsloth's "dynamic" 4-bit uploads leave chosen layers in 16 bits (llm_int8_skip_modules per checkpoint).
        raise RowRefused("row_quantization_unsupported", f"model '{text}' is an Unsloth dynamic 4-bit checkpoint: "
                         "which layers stay in 16 bits is not in the catalog")
    written = parse(name)
    # params_nominal "7B", "12B (13B)": the first; else a size the name's own comment gives ("Llama 2 (7B)")
    hint = re.search(r"\d+(?:\.\d+)?\s*[bm]\b", size_hint.lower()) or \
        re.search(r"\d+(?:\.\d+)?\s*[bm]\b", " ".join(re.findall(r"\(([^)]*)\)", text)).lower())
    if not written.sizes and hint:
        written = replace(written, sizes=parse(hint.group().replace(" ", "")).sizes)
    fits = []
    for index, rec in enumerate(model_records()):
        found = [f for n in _namings(rec.id) if (f := fit(written, n, _counted(rec.id), _stated(rec.id))) is not None]
        if found:
            best = min(found, key=lambda f: (f.tier, f.extra_tuned))
            fits.append((best.tier, best.extra_tuned, index, rec.id))
    if not fits:
        if written.quant:
            formats = ", ".join(sorted(written.quant))
            raise RowRefused("row_unknown_model", f"model '{text}' is a pre-quantized ({formats}) checkpoint the "
                             "catalog lacks: its quantization_config is needed")
        raise RowRefused("row_unknown_model", f"model '{text}' is not in the catalog")
    tier = min(f[0] for f in fits)
    closest = sorted(f for f in fits if f[0] == tier)
    ids = [f[3] for f in sorted(closest, key=lambda f: f[2])]
    vocab = _vocab_spread(ids)
    if vocab is None:
        raise RowRefused("row_ambiguous_model", f"model '{text}' names catalog models of different architectures: "
                         + ", ".join(ids) + " (write the checkpoint id)")
    # a base release, then the first version (v0.1 before v0.3, 4k before 128k: the ids' numbers), then file order
    _, extra_tuned, _, rid = min(closest, key=lambda f: (f[1], _numbers(f[3]), f[2]))
    others = ", ".join(i for i in ids if i != rid)
    kind = "same architecture" if vocab == 1.0 else f"same architecture but for vocabularies {vocab - 1:.1%} apart"
    same = f" (as {others}: {kind})" if others else ""
    if written.bnb_bits:
        note = (f"model '{text}' is a bitsandbytes {written.bnb_bits}-bit upload of catalog {rid}{same}: that "
                f"architecture loaded in {written.bnb_bits}-bit (the quantization column's format, else nf4; double "
                "quantization as the row states)")
    elif tier[0] or extra_tuned:  # a tuned word the record or the name lacks: another release, same shape
        also = f", as {others}" if others else ""
        note = f"model '{text}' not in the catalog: its sibling {rid} ({kind}{also})"
    else:
        note = f"model '{text}' taken as catalog {rid} by its name{same}"
    return rid, note


@cache
def _namings(rid: str) -> tuple[Name, ...]:
    """A record's names as tokens: its id and aliases without organisation, and its display name."""
    rec = models()[rid.lower()]
    return tuple(parse(n) for n in (rec.id.rsplit("/", 1)[-1], rec.name, *(a.rsplit("/", 1)[-1] for a in rec.aliases)))


@cache
def _stated(rid: str) -> tuple[float, ...]:
    """The sizes in billions the record's names state ("Mistral Small 22B Instruct (2409)": 22.0)."""
    return tuple(sorted({v for n in _namings(rid) for s in n.sizes if (v := size_billions(s)) is not None}))


@cache
def _counted(rid: str) -> float:
    """The record's parameter count in billions (checks a written size against a name without one)."""
    return from_hf_config(models()[rid.lower()].config).total_params / 1e9


@cache
def _shape(rid: str) -> tuple[object, ...]:
    """What tells two architectures apart: family, widths, layers, heads, tying, experts, format (the vocabulary
    apart: _vocab_spread)."""
    a = from_hf_config(models()[rid.lower()].config)
    return (a.model_type, a.hidden, a.layers, a.heads, a.kv_heads, a.intermediate, a.tied_embeddings, a.experts,
            a.checkpoint_quant)


def _numbers(rid: str) -> tuple[tuple[int, str], ...]:
    """An id in natural order: its digit runs as numbers (Mistral-7B-v0.1 < v0.3, Phi-3-mini-4k < 128k)."""
    return tuple((int(part), "") if part.isdigit() else (-1, part) for part in re.findall(r"\d+|\D+", rid.lower()))


# Releases of one shape whose vocabularies differ this little are one model to a memory estimate: Mistral-7B v0.3's
# 32768 rows against v0.1/v0.2's 32000 change its weights by 0.1 % and its logits by 2.4 % of their own few MiB.
VOCAB_SPREAD = 1.03


def _vocab_spread(ids: list[str]) -> float | None:
    """The ratio of the largest to the smallest vocabulary of records of one shape (1.0: all equal); None when the
    shapes differ or the vocabularies are further apart than VOCAB_SPREAD."""
    if len({_shape(rid) for rid in ids}) > 1:
        return None
    vocabs = [from_hf_config(models()[rid.lower()].config).vocab for rid in ids]
    spread = max(vocabs) / min(vocabs)
    return spread if spread <= VOCAB_SPREAD else None


# Words that make another card of a model line: a text with one of them names that card, never the catalog card whose
# id lacks it ("RTX 3080 Ti" is not the RTX 3080, "RTX 4000 SFF Ada" not the RTX 4000 Ada, "RTX 4090 D" not the 4090).
VARIANT_WORDS = frozenset({"TI", "SUPER", "SFF", "LAPTOP", "MOBILE", "D"})


def _gpu_family(gpu_id: str) -> tuple[tuple[str, ...], str, int]:
    """A catalog id's distinguishing words, form factor and memory: A100-SXM-80GB -> (A100,), SXM, 80."""
    parts = gpu_id.upper().split("-")
    mem = int(parts[-1][:-2]) if parts[-1].endswith("GB") else 0
    form = next((p for p in parts if p in ("SXM", "PCIE", "NVL")), "")
    # brand words a text may leave out: "RTX 8000" names the Quadro-RTX-8000-48GB
    words = tuple(p for p in parts[:-1] if p not in ("SXM", "PCIE", "NVL", "RTX", "QUADRO"))
    return words, form, mem


def match_gpu(text: str) -> tuple[str | None, str | None]:
    """The catalog GPU a gpu_model text names (its model words and, if stated, memory); with the memory or
    form factor unstated, the largest SXM variant, said in the returned assumption."""
    upper = text.upper()
    # The name nvidia-smi prints ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3") names one card.
    bare = re.sub(r"^NVIDIA\s+", "", re.sub(r"\s+", " ", upper).strip())
    for gpu in gpus().values():
        if bare == re.sub(r"^NVIDIA\s+", "", str(gpu.record.get("reported_name", "")).upper()):
            return gpu.id, None
    upper = re.sub(r"(?<![A-Z0-9])\d+\s*[X×]\s*(?=[A-Z])", " ", upper)  # "2xA100", "8x H100": a GPU count
    upper = re.sub(COUNT_AFTER, " ", upper, flags=re.I)  # "T4x2", "A100 80GB x 8"
    tokens = set(re.findall(r"[A-Z0-9]+", upper))
    for tok in list(tokens):
        glued = re.match(r"(RTX|GTX|TESLA|GEFORCE)(\w+)$", tok)  # "RTX4090", "TeslaT4"
        if glued:
            tokens |= set(glued.groups())
        if re.fullmatch(r"SXM\d", tok):  # SXM2 / SXM4 / SXM5: the SXM form factor
            tokens.add("SXM")
    # "80GB", "80 GiB", or a bare "G" after a number that is no model name's ("A100-40G"; not "A10G")
    stated = re.search(r"(\d+)\s*GI?B", upper) or re.search(r"(?<![A-Z0-9])(\d+)\s*G(?![A-Z0-9])", upper)
    found = []
    for gid in gpus():
        words, form, mem = _gpu_family(gpus()[gid].id)
        if words and all(w in tokens for w in words) and not (tokens & VARIANT_WORDS) - set(words):
            found.append((len(words), gpus()[gid].id, form, mem))
    if not found and stated:
        # Only a memory size ("2X40GB GPUs"): the catalog cards of that size, if they are one model.
        same = [gpus()[g].id for g in gpus() if _gpu_family(gpus()[g].id)[2] == int(stated.group(1))]
        if same and len({_gpu_family(g)[0] for g in same}) == 1:
            found = [(1, g, _gpu_family(g)[1], _gpu_family(g)[2]) for g in same]
    if not found:
        return None, None
    best_len = max(f[0] for f in found)
    cands = [f for f in found if f[0] == best_len]
    if stated:
        # a memory size the model's catalog cards lack names another card ("RTX 4060 Ti 8GB", a 48 GB RTX 4090)
        cands = [f for f in cands if f[3] == int(stated.group(1))]
        if not cands:
            return None, None
    for form in ("PCIE", "SXM", "NVL"):
        if form in tokens:
            boards = [f for f in cands if f[2] == form]
            if not boards and all(f[2] for f in cands):
                # a form factor none of the line's catalog boards has names another board ("H800 PCIe", "P100-SXM2")
                return None, None
            cands = boards or cands
    if len(cands) == 1:
        return cands[0][1], None
    # Unstated form factor: the SXM board (the common rental: "H100" is the SXM5 80GB, not the NVL 94GB),
    # then the largest memory.
    pick = max(cands, key=lambda f: (f[2] == "SXM", f[3]))
    return pick[1], f"gpu '{text}' taken as {pick[1]} (largest/SXM variant)"
