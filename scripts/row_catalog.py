"""A published measurement row's model and GPU columns matched to the sizing catalog (scripts/validate_rows.py).

A model column names a catalog id, an alias, a checkpoint without its organisation, a display name or a chat /
instruct sibling of one; a gpu_model column names a card by nvidia-smi's name or by its model words, memory and form
factor. What is taken as what is returned as an assumption; a model the catalog lacks is refused.
"""

from __future__ import annotations

import re

from row_columns import RowRefused
from sizing.catalog import gpus, models


def model_id(text: str) -> str:
    """The checkpoint id: the first word of the column ("org/name (comment)" -> "org/name")."""
    words = text.strip().split()
    return words[0] if words else ""


def catalog_model(text: str) -> tuple[str, str | None]:
    """The catalog id a model column names: its first word as an id or alias, else that word without the
    organisation, else the column as a display name (each only when it names one model)."""
    word = model_id(text)
    if word.lower() in models():
        return word, None
    base = word.lower().rsplit("/", 1)[-1]
    by_base = {rec.id for key, rec in models().items() if key.rsplit("/", 1)[-1] == base}
    by_name = {rec.id for rec in models().values() if rec.name.lower() == re.sub(r"\s*\(.*", "", text).strip().lower()}
    for found in (by_base, by_name):
        if len(found) == 1:
            rid = found.pop()
            return rid, f"model '{text}' taken as catalog {rid}"
    # A chat / instruct / base sibling: fine-tuned variants keep their base model's architecture; used only
    # when every sibling in the catalog has the same config shape.
    core = _sibling_key(base)
    siblings = sorted({rec.id for key, rec in models().items() if _sibling_key(key.rsplit("/", 1)[-1]) == core})
    shapes = {tuple(sorted((k, str(v)) for k, v in models()[sid.lower()].config.items()
                           if k in ("hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads",
                                    "num_key_value_heads", "vocab_size", "tie_word_embeddings"))) for sid in siblings}
    if siblings and len(shapes) == 1:
        return siblings[0], f"model '{text}' not in the catalog: its sibling {siblings[0]} (same architecture)"
    raise RowRefused("row_unknown_model", f"model '{word}' is not in the catalog")


def _sibling_key(name: str) -> str:
    """A checkpoint name without its chat / instruct / base / -hf suffixes."""
    return re.sub(r"(-(instruct|chat|it|base|hf|v\d(\.\d)?-instruct))+$", "", name.lower())


def _gpu_family(gpu_id: str) -> tuple[tuple[str, ...], str, int]:
    """A catalog id's distinguishing words, form factor and memory: A100-SXM-80GB -> (A100,), SXM, 80."""
    parts = gpu_id.upper().split("-")
    mem = int(parts[-1][:-2]) if parts[-1].endswith("GB") else 0
    form = next((p for p in parts if p in ("SXM", "PCIE", "NVL")), "")
    words = tuple(p for p in parts[:-1] if p not in ("SXM", "PCIE", "NVL", "RTX"))
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
    tokens = set(re.findall(r"[A-Z0-9]+", upper))
    for tok in list(tokens):
        glued = re.match(r"(RTX|GTX|TESLA|GEFORCE)(\w+)$", tok)  # "RTX4090", "TeslaT4"
        if glued:
            tokens |= set(glued.groups())
        if re.fullmatch(r"SXM\d", tok):  # SXM2 / SXM4 / SXM5: the SXM form factor
            tokens.add("SXM")
    stated = re.search(r"(\d+)\s*GB", upper)
    found = []
    for gid in gpus():
        words, form, mem = _gpu_family(gpus()[gid].id)
        if words and all(w in tokens for w in words):
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
        cands = [f for f in cands if f[3] == int(stated.group(1))] or cands
    for form in ("PCIE", "SXM", "NVL"):
        if form in tokens:
            cands = [f for f in cands if f[2] == form] or cands
    if len(cands) == 1:
        return cands[0][1], None
    # Unstated form factor: the SXM board (the common rental: "H100" is the SXM5 80GB, not the NVL 94GB),
    # then the largest memory.
    pick = max(cands, key=lambda f: (f[2] == "SXM", f[3]))
    return pick[1], f"gpu '{text}' taken as {pick[1]} (largest/SXM variant)"
