# The Trainer of the configured framework (transformers.Trainer or TRL's SFTTrainer), measured step by step.
from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .data import Collator, ListDataset
from .faults import inject
from .measure import Recorder


def checkpointing_kwargs(args_class: Any, enabled: bool) -> dict[str, Any]:
    """Gradient checkpointing under the name this transformers takes: `activation_checkpointing` (newer 5.x)
    or `gradient_checkpointing` (5.17 and older); found by looking, not by version number."""
    params = inspect.signature(args_class).parameters
    name = "activation_checkpointing" if "activation_checkpointing" in params else "gradient_checkpointing"
    return {name: enabled, f"{name}_kwargs": {"use_reentrant": False} if enabled else None}


def _common(cfg: Mapping[str, Any], out: Path, max_steps: int, lr: float, seed: int, cpu: bool) -> dict[str, Any]:
    batch = int(cfg["per_device_train_batch_size"])
    return {"output_dir": str(out / "checkpoints"), "max_steps": max_steps, "per_device_train_batch_size": batch,
            "gradient_accumulation_steps": int(cfg["gradient_accumulation_steps"]),
            "bf16": bool(cfg["bf16"]), "fp16": bool(cfg["fp16"]), "optim": cfg["optim"], "learning_rate": lr,
            "logging_steps": 1, "save_strategy": "no", "report_to": [], "seed": seed,
            "data_seed": seed, "dataloader_num_workers": 0, "disable_tqdm": True, "use_cpu": cpu,
            "warmup_steps": 0, "lr_scheduler_type": "constant", "torch_compile": bool(cfg["torch_compile"]),
            **_evaluation(cfg)}


def _evaluation(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration's evaluation pass, run after every step (eval_steps=1) so that each measured step holds
    one (Recorder.evaluated), at per_device_eval_batch_size; without one the trial's own evaluations before and
    after training use the training batch and no step holds an evaluation."""
    if cfg["eval_strategy"] == "no":
        return {"per_device_eval_batch_size": int(cfg["per_device_train_batch_size"]), "eval_strategy": "no"}
    return {"per_device_eval_batch_size": int(cfg["per_device_eval_batch_size"]), "eval_strategy": "steps",
            "eval_steps": 1, "eval_accumulation_steps": cfg["eval_accumulation_steps"],
            "batch_eval_metrics": bool(cfg["batch_eval_metrics"]),
            "eval_do_concat_batches": bool(cfg["eval_do_concat_batches"]),
            "prediction_loss_only": not cfg["compute_metrics"]}


def _metrics(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """compute_metrics (next-token accuracy) and, as configured, a preprocess_logits_for_metrics keeping the argmax:
    the configured evaluation pass then keeps each batch's predictions as the run would."""
    if not cfg["compute_metrics"]:
        return {}
    argmax = cfg["preprocess_logits_for_metrics"] == "argmax"
    return {"compute_metrics": TokenAccuracy(),
            "preprocess_logits_for_metrics": (lambda logits, labels: logits.argmax(dim=-1)) if argmax else None}


class TokenAccuracy:
    """compute_metrics: the share of next tokens predicted right (labels -100: padding), from logits or their argmax;
    from one whole, a list of batches (eval_do_concat_batches false) or, with batch_eval_metrics, batch by batch on
    the GPU (counts summed until compute_result)."""

    def __init__(self) -> None:
        self.right = self.scored = 0

    def __call__(self, prediction: Any, compute_result: bool = True) -> dict[str, float]:
        predictions, labels = prediction.predictions, prediction.label_ids
        pairs = zip(predictions, labels, strict=True) if isinstance(predictions, list) else [(predictions, labels)]
        for ids, batch_labels in pairs:
            if ids.ndim == 3:
                ids = ids.argmax(-1)
            scored = batch_labels[:, 1:] != -100
            self.right += int(((ids[:, :-1] == batch_labels[:, 1:]) & scored).sum())
            self.scored += int(scored.sum())
        if not compute_result:
            return {}
        right, scored_all = self.right, self.scored
        self.right = self.scored = 0
        return {"token_accuracy": right / max(scored_all, 1)}


def metrics_set(cfg: Mapping[str, Any], evalset: ListDataset) -> ListDataset:
    """The evaluation set of the configured pass: with compute_metrics, eval_samples sequences of max_seq_length
    tokens cut from the held-out tokens (repeated as needed), as the estimate has them (what the loop keeps grows
    with their number and length, not with the text; TRL's packing leaves full-length sequences as they are); with
    batch_eval_metrics and no eval_samples, one evaluation batch of them (the estimate's); else the held-out
    sequences."""
    if not cfg["compute_metrics"]:
        return evalset
    length = int(cfg["max_seq_length"])
    count = int(cfg["eval_samples"] or int(cfg["per_device_eval_batch_size"]) * int(cfg["num_gpus"]))
    flat = [t for s in evalset.seqs for t in s]
    tokens = (flat * (length * count // len(flat) + 1))[:length * count]
    return ListDataset([tokens[i * length:(i + 1) * length] for i in range(count)])


def plain_evaluate(trainer: Any) -> float:
    """The trial's own evaluation before and after training: the loss only, without compute_metrics, so that no kept
    predictions enter what is cached before the first step."""
    kept = trainer.compute_metrics, trainer.preprocess_logits_for_metrics, trainer.args.prediction_loss_only
    trainer.compute_metrics = trainer.preprocess_logits_for_metrics = None
    trainer.args.prediction_loss_only = True
    try:
        return float(trainer.evaluate()["eval_loss"])
    finally:
        trainer.compute_metrics, trainer.preprocess_logits_for_metrics, trainer.args.prediction_loss_only = kept


def _callback(recorder: Recorder) -> Any:
    from transformers import TrainerCallback

    class Measure(TrainerCallback):  # type: ignore[misc,unused-ignore]
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            recorder.begin()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            recorder.end(state.global_step)

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            recorder.training = True

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            recorder.training = False

        def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if recorder.training:  # the configured evaluation pass after a step, not the trial's own before/after
                accuracy = (kwargs.get("metrics") or {}).get("eval_token_accuracy")
                recorder.evaluated(state.global_step, None if accuracy is None else float(accuracy))

        def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            logs = kwargs.get("logs")
            if logs and "loss" in logs:
                recorder.loss(state.global_step, float(logs["loss"]))

    return Measure()


def _measured(base: Any, recorder: Recorder) -> Any:
    """The trainer class with the data order kept (longest first) and each micro-batch counted."""
    from torch.utils.data import SequentialSampler

    class Measured(base):  # type: ignore[misc,unused-ignore]
        def _get_train_sampler(self, *a: Any, **kw: Any) -> Any:
            return SequentialSampler(self.train_dataset)

        def training_step(self, model: Any, inputs: dict[str, Any], *a: Any, **kw: Any) -> Any:
            inject("train", self.state.global_step + 1)
            recorder.count(inputs)
            return super().training_step(model, inputs, *a, **kw)

    return Measured


def make_trainer(model: Any, cfg: Mapping[str, Any], out: Path, max_steps: int, lr: float, seed: int,
                 train: ListDataset, evalset: ListDataset, tokenizer: Any, recorder: Recorder) -> Any:
    """transformers.Trainer for framework transformers; SFTTrainer with SFTConfig's defaults for trl."""
    import torch

    cpu = not torch.cuda.is_available()
    common = _common(cfg, out, max_steps, lr, seed, cpu)
    if cfg["framework"] == "trl":
        return _sft_trainer(model, cfg, common, train, evalset, tokenizer, recorder)
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(**common, **checkpointing_kwargs(TrainingArguments, bool(cfg["gradient_checkpointing"])),
                             remove_unused_columns=False)
    trainer = _measured(Trainer, recorder)(model=model, args=args, train_dataset=train,
                                           eval_dataset=metrics_set(cfg, evalset),
                                           data_collator=Collator(tokenizer.pad_token_id),
                                           callbacks=[_callback(recorder)], **_metrics(cfg))
    return _quiet(trainer)


def _quiet(trainer: Any) -> Any:
    """No log dicts on stdout (disable_tqdm prints them instead); the trial prints its own lines."""
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    return trainer


def _sft_trainer(model: Any, cfg: Mapping[str, Any], common: dict[str, Any], train: ListDataset,
                 evalset: ListDataset, tokenizer: Any, recorder: Recorder) -> Any:
    """TRL: pre-tokenized rows (TRL skips its own tokenization), its collator, packing and fused loss."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from .model import cast_adapter, lora_config

    args = SFTConfig(**common, **checkpointing_kwargs(SFTConfig, bool(cfg["gradient_checkpointing"])),
                     max_length=int(cfg["max_seq_length"]), packing=bool(cfg["packing"]),
                     activation_offloading=bool(cfg["activation_offloading"]))
    peft = None if cfg["method"] == "full" else lora_config(cfg)
    trainer = _measured(SFTTrainer, recorder)(
        model=model, args=args, processing_class=tokenizer, peft_config=peft,
        train_dataset=Dataset.from_dict({"input_ids": train.seqs}),
        eval_dataset=Dataset.from_dict({"input_ids": metrics_set(cfg, evalset).seqs}), callbacks=[_callback(recorder)],
        **_metrics(cfg))
    if peft is not None:
        cast_adapter(trainer.model, cfg["adapter_dtype"])
    return _quiet(trainer)
