# The command line: refuse bad input before any model is loaded, run the phases, always leave a report.
"""A short, representative fine-tuning trial that measures what the `sizing` estimate predicts.

    python trial.py CONFIG.json --data DATA.jsonl --out DIR --max-steps N
                    [--random-weights [--base-cache DIR]] [--tokenizer PATH] [--eval-fraction 0.1] [--seed 0]
    accelerate launch --num_processes 2 trial.py ...                   # DDP: per-GPU figures
    accelerate launch --config_file fsdp.yaml trial.py ...             # FSDP

CONFIG.json is the calculator's run configuration; it is normalised by the same code as `sizing estimate`
(embedded in this file), and a field this run would not honour is refused before anything is loaded. The
trial trains --max-steps optimizer steps on the longest samples first, evaluates the held-out loss before and
after, saves the weights, reloads them and checks them bit for bit (and the outputs). DIR/report.json
(report.schema.json) is rewritten after every step; `python -m sizing report DIR/report.json` compares it with
the estimate. The Hugging Face token comes from HF_TOKEN or the login cache and is never written.

Exit status: 0 ok, 1 error, 2 bad input, 3 out of memory, 4 a check failed, 130 / 143 interrupted (SIGINT / SIGTERM).
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
import traceback
import warnings
from pathlib import Path
from types import FrameType
from typing import Any

from . import checks, data, measure, model, report, sources
from .config import BadInput, check_supported, configure_allocator, launch, normalise, read_raw
from .env import gib, hardware, now, progress, rank, scrub_text, token, versions
from .faults import SimulatedOOM, inject


class Interrupted(BaseException):
    """SIGTERM or SIGINT arrived: stop, keep what was measured, say so."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


def parser() -> argparse.ArgumentParser:
    """The command line (the page documents the same flags)."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("config", help="the run configuration JSON (the calculator's export)")
    p.add_argument("--data", required=True, help='JSONL: {"text": ...} or {"messages": [...]} per line')
    p.add_argument("--out", required=True, help="output folder: report.json, the saved weights, logs")
    p.add_argument("--max-steps", type=int, required=True, help="optimizer steps to train (at least 1)")
    p.add_argument("--random-weights", action="store_true", help="the architecture with random weights")
    p.add_argument("--base-cache", default=None, help="with --random-weights: build the random base here once "
                   "and reuse it (default: OUT/random-base, rebuilt each run)")
    p.add_argument("--tokenizer", default=None, help="tokenizer path or id (default: the model's)")
    p.add_argument("--eval-fraction", type=float, default=0.1, help="share of examples held out")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--learning-rate", type=float, default=None, help="default 2e-4 (LoRA), 2e-5 (full)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one trial; the exit status says how it ended and the report says why."""
    args = parser().parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    r = rank()[0]
    report.clean(out, r)
    trial = {"max_steps": args.max_steps, "eval_fraction": args.eval_fraction, "seed": args.seed,
             "random_weights": bool(args.random_weights), "learning_rate": args.learning_rate}
    doc = report.new_report(trial, None)
    handlers = {s: signal.signal(s, _on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning)  # renamed arguments in transformers 5
            return _guarded(args, out, doc)
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)


def _guarded(args: argparse.Namespace, out: Path, doc: dict[str, Any]) -> int:
    steps: list[dict[str, Any]] = doc["measurements"]["steps"]
    box: list[measure.Recorder] = []
    code = report.EXIT["error"]
    try:
        if args.max_steps < 1:
            raise BadInput("--max-steps must be at least 1", "--max-steps")
        if not 0 < args.eval_fraction < 1:
            raise BadInput("--eval-fraction must be between 0 and 1", "--eval-fraction")
        raw = read_raw(args.config)
        doc["config_as_given"], doc["config"] = raw, raw
        cfg = normalise(raw)
        doc["config"] = cfg
        check_supported(cfg, launch())
        configure_allocator(bool(cfg["expandable_segments"]))
        report.write(out, doc)
        run(args, out, doc, cfg, box)
        failed = doc["checks"]["failed"]
        if failed:
            doc["status"], doc["message"], code = "check_failed", "; ".join(failed), report.EXIT["check_failed"]
            doc["failure"] = _failure("check_failed", doc, None)
        else:
            doc["status"], doc["message"], code = "ok", "trial completed", report.EXIT["ok"]
    except BaseException as exc:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal must not stop the last write
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        code = _failed(exc, out, doc, box)
    doc["finished_at"] = now()
    if box:
        doc["measurements"]["peaks"] = measure.peaks(steps, box[0].reason)
    path = report.write(out, doc)
    progress(f"{doc['status']}: {doc['message']}")
    if doc["status"] == "error" and (out / "error-traceback.txt").exists():
        progress(f"the traceback is in {out / 'error-traceback.txt'}")
    progress(f"report: {path}")
    return code


def _failure(kind: str, doc: dict[str, Any], step: int | None, exc: BaseException | None = None,
             partial: dict[str, Any] | None = None, field: str | None = None) -> dict[str, Any]:
    return {"kind": kind, "phase": doc["phase"], "step": step, "field": field,
            "exception": type(exc).__name__ if exc is not None else None,
            "peak_allocated_bytes": partial.get("max_memory_allocated_bytes") if partial else None,
            "peak_reserved_bytes": partial.get("max_memory_reserved_bytes") if partial else None}


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, SimulatedOOM):
        return True
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(exc, torch.OutOfMemoryError)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def _failed(exc: BaseException, out: Path, doc: dict[str, Any], box: list[measure.Recorder]) -> int:
    """Turn whatever stopped the run into a status, a one-line message and an exit code."""
    partial = box[0].partial() if box and doc["phase"] == "train" else None
    step = partial["step"] if partial else None
    if isinstance(exc, BadInput):
        doc["status"], doc["message"] = "error", str(exc)
        doc["failure"] = _failure("bad_input", doc, None, exc, field=exc.field)
        return report.EXIT["bad_input"]
    if isinstance(exc, Interrupted | KeyboardInterrupt):
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        name = signal.Signals(signum).name
        where = f"step {step}" if step else f"the {doc['phase']} phase"
        doc["status"], doc["message"] = "interrupted", f"interrupted by {name} in {where}"
        doc["failure"] = _failure("interrupted", doc, step, exc, partial)
        return 128 + int(signum)
    if _is_oom(exc):
        peak = partial.get("max_memory_allocated_bytes") if partial else None
        where = f"step {step}" if step else f"the {doc['phase']} phase"
        doc["status"] = "oom"
        doc["message"] = (f"out of memory at {where}: peak allocated in that step {gib(peak)}"
                          f"{' (no GPU: not measured)' if peak is None else ''}; {_one_line(exc)}")
        doc["failure"] = _failure("out_of_memory", doc, step, exc, partial)
        return report.EXIT["oom"]
    doc["status"], doc["message"] = "error", _one_line(exc)
    doc["failure"] = _failure("error", doc, step, exc, partial)
    (out / "error-traceback.txt").write_text(scrub_text(traceback.format_exc(), token()), encoding="utf-8")
    return report.EXIT["error"]


def _rewrite(out: Path, doc: dict[str, Any]) -> None:
    report.write(out, doc)


def _phase(doc: dict[str, Any], out: Path, name: str) -> None:
    doc["phase"] = name
    report.write(out, doc)
    inject(name)


def run(args: argparse.Namespace, out: Path, doc: dict[str, Any], cfg: dict[str, Any],
        box: list[measure.Recorder]) -> None:
    """The phases: setup, load, eval_before, train, eval, save, reload, done."""
    inject("setup")
    rows = data.read_jsonl(args.data)  # bad data is refused before torch starts
    import torch

    r, world, local = rank()
    if world > 1 and torch.cuda.is_available():
        torch.cuda.set_device(local)  # one GPU per process; the 4-/8-bit base is placed on it
    doc["versions"], doc["hardware"] = versions(), hardware()
    if not torch.cuda.is_available():
        progress("no CUDA device: the trial runs on the CPU, GPU memory figures will be null")
    model_config = cfg["model_config"] if cfg["model_config"] is not None else model.hub_config(cfg["model"])
    tokenizer = sources.tokenizer(args.tokenizer, args.random_weights, cfg["model"])
    vocab = model.vocab_size(model_config)
    if vocab is not None and len(tokenizer) > vocab:
        raise BadInput(f"the tokenizer has {len(tokenizer)} tokens but the model's vocabulary only {vocab}: "
                       "give a matching --tokenizer", "--tokenizer")
    base_source = sources.base(args.random_weights, args.base_cache, out, cfg, model_config, args.seed)

    max_len = int(cfg["max_seq_length"])
    train_rows, eval_rows = data.split(rows, args.eval_fraction, args.seed)
    packing = bool(cfg["packing"]) and cfg["framework"] != "trl"  # TRL packs itself (its default strategy)
    train = data.ListDataset(data.arrange(data.tokenize(train_rows, tokenizer, max_len), max_len, packing))
    evalset = data.ListDataset(data.arrange(data.tokenize(eval_rows, tokenizer, max_len), max_len, packing))
    longest = max(len(s) for s in train.seqs)
    doc["data"] = {"train_sequences": len(train), "eval_sequences": len(evalset), "longest_train_tokens": longest,
                   "max_seq_length": max_len, "packing": bool(cfg["packing"]),
                   "packing_by": "trl" if cfg["framework"] == "trl" and cfg["packing"] else "trial",
                   "order": "longest first"}
    progress(f"data: {len(train)} train / {len(evalset)} eval sequences, longest {longest} tokens")
    if cfg["compute_metrics"]:
        from .train import metrics_set

        metrics_sequences = len(metrics_set(cfg, evalset))
        doc["data"]["metrics_eval_sequences"] = metrics_sequences
        kept = "hands each batch's predictions to compute_metrics" if cfg["batch_eval_metrics"] else \
            "keeps the predictions"
        progress(f"the evaluation after each step {kept} of {metrics_sequences} sequences of {max_len} tokens "
                 "(compute_metrics: eval_samples, cut from the held-out tokens)")

    _phase(doc, out, "load")
    progress(f"loading the base ({cfg['method']}, {model.quant_bits(cfg) or 'no'}-bit quantization)")
    net = model.load_base(base_source, cfg)
    if cfg["framework"] != "trl":
        net = model.apply_adapter(net, cfg)  # SFTTrainer applies the peft_config itself
    recorder = measure.Recorder(args.max_steps, doc["measurements"]["steps"], lambda: _rewrite(out, doc))
    box.append(recorder)
    lr = args.learning_rate if args.learning_rate is not None else (2e-5 if cfg["method"] == "full" else 2e-4)
    trainer = _trainer(net, cfg, out, args, lr, train, evalset, tokenizer, recorder)
    net = trainer.model
    doc["model"] = {"source": "random weights" if args.random_weights else base_source,
                    "trainable_parameters": int(sum(p.numel() for p in net.parameters() if p.requires_grad)),
                    "parameters": int(sum(p.numel() for p in net.parameters())),
                    "trainable_dtypes": sorted({str(p.dtype).removeprefix("torch.") for p in net.parameters()
                                                if p.requires_grad})}
    sharded = bool(getattr(trainer, "is_fsdp_enabled", False))
    doc["hardware"]["fsdp_sharded"] = sharded  # accelerate drops FSDP on a CPU launch: say what really ran
    check_here = r == 0 and not sharded
    inputs = checks.fixed_inputs(evalset, tokenizer.pad_token_id)
    start = checks.logits(net, inputs, cfg) if check_here else None
    initial = checks.weights(net, cfg) if check_here else {}

    from .train import plain_evaluate

    _phase(doc, out, "eval_before")
    doc["checks"]["eval_loss_before"] = plain_evaluate(trainer)
    progress(f"eval loss before: {doc['checks']['eval_loss_before']:.4f}; training {args.max_steps} steps")
    doc["measurements"]["before_train"] = measure.before_train()
    _phase(doc, out, "train")
    trainer.train()
    doc["measurements"]["peaks"] = measure.peaks(recorder.steps, recorder.reason)
    _phase(doc, out, "eval")
    doc["checks"]["eval_loss_after"] = plain_evaluate(trainer)
    progress(f"eval loss after: {doc['checks']['eval_loss_after']:.4f}")

    _phase(doc, out, "save")
    saved = out / ("model" if cfg["method"] == "full" else "adapter")
    trainer.save_model(str(saved))
    if r == 0:
        tokenizer.save_pretrained(str(saved))
    doc["saved"] = saved.name
    _phase(doc, out, "reload")
    if check_here:
        reference = checks.logits(trainer.model, inputs, cfg)
        trained = checks.weights(trainer.model, cfg)
    del trainer, net
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    if sharded:
        doc["checks"]["reload_reason"] = ("not checked under FSDP (the weights are sharded): reload the saved "
                                          "weights in one process")
    elif check_here:
        progress("reloading the saved weights")
        doc["checks"].update(checks.reload_check(saved, base_source, cfg, reference, start, inputs, trained,
                                                 initial))
        c = doc["checks"]
        progress(f"reload: {c['reload_weights_compared']} tensor(s) compared, equal {c['reload_weights_equal']}; "
                 f"logits max |diff| {c['reload_max_abs_diff']:.2e}; trained vs untrained {c['base_max_abs_diff']:.2e}")
    else:
        doc["checks"]["reload_reason"] = "checked by rank 0 only"
    doc["phase"] = "done"


def _trainer(net: Any, cfg: dict[str, Any], out: Path, args: argparse.Namespace, lr: float, train: Any,
             evalset: Any, tokenizer: Any, recorder: measure.Recorder) -> Any:
    from .train import make_trainer

    return make_trainer(net, cfg, out, args.max_steps, lr, args.seed, train, evalset, tokenizer, recorder)
