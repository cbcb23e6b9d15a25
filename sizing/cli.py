# Command line: argument parsing and printing only; every number comes from the engine.
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from . import catalog
from . import report as trial_report
from .arch import from_hf_config
from .config import normalize
from .config import parse_config as load_config
from .contract import BY_NAME, FIELDS, doc, flag, parse_value, read_json
from .errors import SizingError
from .estimate import Estimate, estimate
from .memory.timeline import COMPONENTS
from .schema import SCHEMA_PATH, schema_text
from .solve import fit_table
from .time.cost import parse_deadline, parse_prices, rank
from .time.report import time_lines

GiB = 2**30
# Fields with their own option (the most used ones, marked in the contract table); --set covers every field.
_FLAGS = tuple(f.name for f in FIELDS if f.flag)


def _read_bytes(path: str, code: str) -> bytes:
    try:
        if path == "-":
            return sys.stdin.buffer.read()
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise SizingError(code, f"cannot read {path}: {exc.strerror}", field=None, path=path) from None


def _read_config(path: str) -> dict[str, Any]:
    data = read_json(_read_bytes(path, "config_unreadable"), path, unique_keys=True)
    if not isinstance(data, dict):
        raise SizingError("invalid_config", f"the configuration must be a JSON object, not a JSON {_kind(data)}",
                          field=None)
    return data


def _kind(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {name: parse_value(name, getattr(args, name)) for name in _FLAGS
                           if getattr(args, name, None) is not None}
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SizingError("bad_override", f"--set takes FIELD=VALUE, got '{item}'", field=None, value=item)
        out[key.strip()] = parse_value(key.strip(), value)
    return out


def _run(args: argparse.Namespace) -> dict[str, Any]:
    """The configuration file with the command line's overrides on top."""
    data = _read_config(args.config)
    data.update(_overrides(args))
    return data


def _gib(n: int | float) -> str:
    return f"{n / GiB:.2f}"


def format_estimate(est: Estimate) -> str:
    pk = est.peak_moment
    cfg = est.config
    reg = est.regime
    lines = [
        f"{est.model_name}: {cfg.method}, {reg.load_dtype} weights, {'autocast ' if reg.autocast else ''}"
        f"compute {'bf16' if cfg.bf16 else 'fp16' if cfg.fp16 else reg.load_dtype}, "
        f"batch {cfg.per_device_train_batch_size} x {cfg.max_seq_length} tokens, "
        f"checkpointing {'on' if reg.checkpointing else 'off'}, {cfg.optim}, framework {cfg.framework}",
        "",
        "Memory at the peak (GiB)",
    ]
    width = max(len(c) for c in COMPONENTS)
    for name in COMPONENTS:
        lines.append(f"  {name:<{width}}  {_gib(pk.parts.get(name, 0)):>8}")
    lo = est.range_bytes
    lines += [
        "",
        f"Peak: {pk.phase} (step {pk.step}: {pk.what})",
        f"  allocated (torch.cuda.max_memory_allocated)  {_gib(est.allocated_bytes):>8} GiB"
        f"   range {_gib(lo['allocated'][0])}-{_gib(lo['allocated'][1])}",
        f"  reserved  (torch.cuda.max_memory_reserved)   {_gib(est.reserved_bytes):>8} GiB"
        f"   range {_gib(lo['reserved'][0])}-{_gib(lo['reserved'][1])}",
        *([f"            at the card's wall; an ample card reserves {_gib(est.detail['ample_reserved_bytes'])} GiB"]
          if est.detail.get("ample_reserved_bytes", est.reserved_bytes) != est.reserved_bytes else []),
        f"  device    (nvidia-smi, with CUDA context)     {_gib(est.device_bytes):>8} GiB"
        f"   range {_gib(lo['device'][0])}-{_gib(lo['device'][1])}",
        f"  confidence: {est.confidence}" + "".join(f"; {r['message']}" for r in est.confidence_reasons),
    ]
    for fit in est.fits:
        verdict = "fits" if fit["fits"] else ("does NOT run (the card has no bf16)"
                                               if fit.get("refusal") == "gpu_no_bf16" else "does NOT fit")
        lines += ["", f"{fit['gpu']}: {verdict} ({_gib(fit['usable_bytes'])} GiB usable after the CUDA context, "
                  f"headroom {_gib(fit['headroom_bytes'])} GiB); largest micro-batch {fit['max_micro_batch']}, "
                  f"longest sequence {fit['max_seq_length']}"]
    t = est.time
    if t is None:
        lines += ["", "Time: no throughput figures for this GPU"]
    else:
        lines += ["", *time_lines(t, cfg.dataset_tokens, cfg.num_train_epochs, cfg.num_gpus)]
    if est.warnings:
        lines += ["", "Warnings:"] + [f"  - {w['message']}" for w in est.warnings]
    return "\n".join(lines)


def _cmd_estimate(args: argparse.Namespace) -> int:
    est = estimate(_run(args))  # its "config" is the complete normalised configuration (config.normalize)
    print(json.dumps(est.to_dict(), indent=2) if args.json else format_estimate(est))
    return 0


def _cmd_config(args: argparse.Namespace) -> int:
    run = _run(args)
    cfg = load_config(run)
    # A model id may be any hub id (a trial loads it), but a model_config is read here as the estimate reads it:
    # an architecture or quantization sizing cannot model is refused with the estimate's code and field.
    if cfg.model_config is not None:
        catalog.resolve_architecture(cfg.model, cfg.model_config)
    print(json.dumps(normalize(run), indent=2, ensure_ascii=False))
    return 0


def _cmd_schema(args: argparse.Namespace) -> int:
    sys.stdout.write(schema_text())
    return 0


def _cmd_fit(args: argparse.Namespace) -> int:
    cfg = load_config(_run(args))
    deadline = parse_deadline(args.deadline) if args.deadline else None
    rows = rank(fit_table(cfg), args.by, parse_prices(args.price), cfg.price_per_gpu_hour, deadline)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'GPU':<20} {'fits':<4} {'headroom':>9} {'max batch':>9} {'max seq':>8} {'fewest':>7} "
          f"{'tokens/s':>9} {'hours':>8} {'cost':>10}")
    for r in rows:
        t = r["time"] or {}
        hours = f"{t['total_hours']:.1f}" if t.get("total_hours") is not None else "-"
        cost = f"{t['cost']:,.0f}" if t.get("cost") is not None else "-"
        tps = f"{t['tokens_per_second']:,.0f}" if t else "-"
        mode = r["fewest_gpus_parallelism"]
        fewest = f"{r['fewest_gpus']}" + ("" if mode == "none" else f" {mode}")
        fits = "yes" if r["fits"] else "no*" if r.get("refusal") == "gpu_no_bf16" else "no"
        print(f"{r['gpu']:<20} {fits:<4} {_gib(r['headroom_bytes']):>9} "
              f"{r['max_micro_batch']:>9} {r['max_seq_length']:>8} {fewest if r['fewest_gpus'] else '-':>7} "
              f"{tps:>9} {hours:>8} {cost:>10}")
    if not rows and deadline is not None:
        print("no GPU fits and finishes within the deadline (hours need dataset_tokens)")
    if any(r.get("refusal") == "gpu_no_bf16" for r in rows):
        print("\nno*: the card has no bf16 (compute capability below 8.0), whatever its headroom; set fp16 instead")
    print("\nheadroom in GiB on one GPU of the configured run; tokens/s, hours and cost on the fewest GPUs;\n"
          "max batch / max seq: the largest that fit on the configured GPU, on the others the largest on the\n"
          "allocator's replay grid (4 steps per doubling: ..., 4096, 5120, 6144, 7168, 8192, ...): up to 20 % below")
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    rows = catalog.model_records()
    if args.json:
        print(json.dumps([{"id": r["id"], "name": r.get("name"), "aliases": r.get("aliases", [])} for r in rows],
                         indent=2))
        return 0
    for rec in rows:
        try:
            arch = from_hf_config(rec["config"])
            shape = f"{arch.all_params / 1e9:6.2f} B params, {arch.layers} layers, ctx {arch.max_positions}"
        except SizingError as exc:
            shape = f"(not supported: {exc.message})"
        print(f"{rec['id']:<55} {shape}")
    return 0


def _cmd_gpus(args: argparse.Namespace) -> int:
    gpus = list(catalog.gpus().values())
    if args.json:
        print(json.dumps([g.record for g in gpus], indent=2))
        return 0
    for g in gpus:
        bf16 = g.bf16_dense_tflops if g.bf16_dense_tflops is not None else "-"
        print(f"{g.id:<20} {g.name:<28} {_gib(g.usable_bytes):>7} GiB available to CUDA  bf16 {bf16} TFLOPS  "
              f"sm {g.compute_capability}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    # read strictly here (deep nesting, 4300+ digit numbers, NaN: one line), then the report's own checks
    data = read_json(_read_bytes(args.report, "report_unreadable"), args.report)
    cmp = trial_report.compare(trial_report.parse_report(data))
    print(json.dumps(cmp, indent=2) if args.json else trial_report.format_comparison(cmp))
    return 0


Command = Callable[[argparse.Namespace], int]


def _run_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, func: Command, text: str,
                json_text: str | None) -> argparse.ArgumentParser:
    """A subcommand that reads one configuration: the file, --json, --set and the table's flags."""
    p = sub.add_parser(name, help=text)
    p.add_argument("config", help="configuration JSON (- for stdin)")
    if json_text is not None:
        p.add_argument("--json", action="store_true", help=json_text)
    p.add_argument("--set", action="append", metavar="FIELD=VALUE", help="override any configuration field")
    for field_name in _FLAGS:
        spec = BY_NAME[field_name]
        choices = f" (one of: {', '.join(spec.choices)})" if spec.choices else ""
        p.add_argument(flag(field_name), dest=field_name, default=None,
                       metavar="CHOICE" if spec.choices else spec.type.upper(), help=doc(field_name, "en") + choices)
    p.set_defaults(func=func)
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sizing", description="GPU memory of LoRA / QLoRA / full fine-tuning")
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parser(sub, "estimate", _cmd_estimate, "estimate one run from a configuration JSON (- for stdin)",
                "print the estimate object of the shared contract")
    fit = _run_parser(sub, "fit", _cmd_fit,
                      "every catalog GPU: fits, headroom, largest batch and sequence, fewest GPUs",
                      "print the rows as JSON")
    fit.add_argument("--by", choices=("gpu", "cost", "hours"), default="gpu", help="sort: catalog order, cost, hours")
    fit.add_argument("--deadline", help="keep GPUs that finish within this time (24h, 90m, 2d); needs dataset_tokens")
    fit.add_argument("--price", action="append", metavar="GPU=PRICE", help="your price per GPU-hour for one GPU")
    _run_parser(sub, "config", _cmd_config, "print the complete normalised configuration (what a trial runs)",
                None)
    sub.add_parser("schema", help=f"print the JSON Schema of configurations ({SCHEMA_PATH})").set_defaults(
        func=_cmd_schema)
    for name, func, text in (("models", _cmd_models, "list catalog models"), ("gpus", _cmd_gpus, "list catalog GPUs")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--json", action="store_true")
        p.set_defaults(func=func)
    rep = sub.add_parser("report", help="compare a trial report (docs/recipes/trial.py) with the estimate of its run")
    rep.add_argument("report")
    rep.add_argument("--json", action="store_true", help="print the comparison as JSON")
    rep.set_defaults(func=_cmd_report)
    return parser


def _one_line(text: str, limit: int = 400) -> str:
    """A message as one printable line: control characters escaped, a pasted megabyte cut short."""
    text = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    return text if len(text) <= limit else text[:limit] + "..."


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except SizingError as exc:
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `sizing fit ... | head`: the reader left, nothing is wrong
        sys.stderr.close()
        return 0
