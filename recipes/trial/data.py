# The training data: JSONL rows, a held-out split, tokenization, longest-first order or packed blocks.
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from .config import BadInput

CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def read_jsonl(path: str) -> list[dict[str, Any]]:
    """Rows with "text" or "messages"; at least two (one to train on, one held out)."""
    rows: list[dict[str, Any]] = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise BadInput(f"cannot read the data {path}: {exc.strerror}", "--data") from None
    except UnicodeDecodeError:
        raise BadInput(f"the data {path} is not UTF-8 text", "--data") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise BadInput(f"{path} line {number} is not valid JSON", "--data") from None
        if not isinstance(row, dict) or not ("text" in row or "messages" in row):
            raise BadInput(f'{path} line {number}: expected {{"text": ...}} or {{"messages": [...]}}', "--data")
        rows.append(row)
    if len(rows) < 2:
        raise BadInput(f"{path} holds {len(rows)} example(s); a trial needs at least 2 (train and eval)", "--data")
    return rows


def split(rows: list[dict[str, Any]], eval_fraction: float, seed: int) -> tuple[list[Any], list[Any]]:
    """(train, eval): shuffled by the seed, split by index before tokenization (no overlap)."""
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    n_eval = min(len(rows) - 1, max(1, round(len(rows) * eval_fraction)))
    return [rows[i] for i in order[n_eval:]], [rows[i] for i in order[:n_eval]]


def byte_tokenizer() -> Any:
    """A byte-level tokenizer made on the spot (259 ids: pad, bos, eos and the 256 bytes); nothing downloaded."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
    for i, char in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet())):
        vocab[char] = i + 3
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tokenize(rows: list[dict[str, Any]], tokenizer: Any, max_len: int) -> list[list[int]]:
    """Token ids per row, EOS-terminated, truncated to max_len (a chat template's own BOS is not doubled)."""
    out: list[list[int]] = []
    for row in rows:
        if "messages" in row:
            if not getattr(tokenizer, "chat_template", None):
                raise BadInput("the data has 'messages' but the tokenizer has no chat template", "--data")
            text = tokenizer.apply_chat_template(row["messages"], tokenize=False)
        else:
            text = str(row["text"])
        ids = list(tokenizer(text, add_special_tokens=True)["input_ids"])
        bos = tokenizer.bos_token_id
        if bos is not None and len(ids) > 1 and ids[0] == bos and ids[1] == bos:
            ids = ids[1:]  # the template wrote a BOS and the tokenizer added another
        if tokenizer.eos_token_id is not None and (not ids or ids[-1] != tokenizer.eos_token_id):
            ids.append(tokenizer.eos_token_id)
        out.append(ids[:max_len])
    return out


def arrange(seqs: list[list[int]], max_len: int, packing: bool) -> list[list[int]]:
    """Longest first (the peak must be seen in the first steps); with packing, full blocks of max_len tokens."""
    ordered = sorted(seqs, key=len, reverse=True)
    if not packing:
        return ordered
    flat = [t for s in ordered for t in s]
    blocks = [flat[i:i + max_len] for i in range(0, len(flat), max_len)]
    return sorted(blocks, key=len, reverse=True)


class ListDataset:
    """Token id lists as a map-style dataset."""

    def __init__(self, seqs: list[list[int]]) -> None:
        self.seqs = seqs

    def __len__(self) -> int:
        return len(self.seqs)

    def __getitem__(self, i: int) -> dict[str, list[int]]:
        return {"input_ids": self.seqs[i]}


def collate(batch: list[dict[str, list[int]]], pad_id: int) -> dict[str, Any]:
    """Right-padded ids, the attention mask, and labels that ignore padding (-100)."""
    import torch

    width = max(len(b["input_ids"]) for b in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, b in enumerate(batch):
        seq = torch.tensor(b["input_ids"], dtype=torch.long)
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


class Collator:
    """collate() with the pad id bound (a class, so the Trainer can pickle it for workers)."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, batch: list[dict[str, list[int]]]) -> dict[str, Any]:
        return collate(batch, self.pad_id)
