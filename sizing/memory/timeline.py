# The phases of one optimizer step and where the peak falls (memory-model.md §0, §9).
from __future__ import annotations

from dataclasses import dataclass, field

from ..parallel import OwnUnits

# The evaluation loop's concatenation of a batch's predictions onto those it keeps for compute_metrics (warnings.py)
EVAL_CONCAT = "evaluation: the predictions kept for compute_metrics, concatenated"
# ... and where nothing is concatenated (a list of batches, or one batch): the last batch's held with the earlier ones
EVAL_HELD = "evaluation: the predictions held for compute_metrics, the last batch's with them"
COMPONENTS = ("weights", "quantization_state", "adapters", "gradients", "optimizer_states", "master_weights",
              "activations", "logits_and_loss", "workspace")


@dataclass
class Moment:
    phase: str  # forward | backward | optimizer | eval (Trainer evaluation); outside the step: load | init | save
    what: str  # a short description of the moment
    step: int  # 0: first optimizer step (states allocated lazily), 1: any later step
    parts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.parts.values())


@dataclass(frozen=True)
class Outside:
    """A moment outside the training step (model load, FSDP init, checkpoint save) that a framework's own
    code runs and whose caching-allocator peaks count for the whole run (reserved only grows)."""

    moment: Moment  # phase "load" | "init" | "save"
    reserved: int  # the allocator's reserved peak over that moment (replayed)
    needed: int  # the same less the cached whole segments a full card releases and retries with


@dataclass(frozen=True)
class StepInputs:
    weights: int
    quant_state: int
    adapters: int
    gradients: int
    head_gradients: int
    optimizer: int  # resident states
    comm_buffers: int  # DDP / ZeRO buckets, FSDP staging: from backward to the step, or always if comm_static
    optimizer_temp: int
    body: int  # decoder activations retained at the end of forward
    shared: int  # cos/sin, padding mask
    head_body: int  # final norm, head input, weight copies
    loss_saved: int
    loss_forward_extra: int
    loss_backward_extra: int
    layer_backward: int  # transient of one layer's backward (incl. recompute under checkpointing)
    forward_transient: int  # autocast weight cache under checkpointing, dequantized weights
    backward_transient: int
    workspace: int
    tied_gradient: int  # a tied embedding's dense gradient before it is added to the head's
    accumulating: bool  # gradient accumulation: grads stay resident across micro-batches
    grads_freed_in_backward: bool  # optimizer-in-backward
    first_layer: int = 0  # layer 0's saved tensors (or checkpoint input) plus its backward transient
    embed_gradient: int = 0  # the input embedding's gradient, produced after layer 0's backward
    layer_gradients: int = 0  # one decoder layer's gradients
    kept_logits: int = 0  # logits the loop keeps referenced (custom loop's `out`), through the next forward
    kept_cache: int = 0  # the KV cache in `out`: beyond the saved k/v once backward frees them
    # logits a loop variable keeps from the loss through backward and the step, freed when the next forward
    # returns (torchtune 0.1-0.2 `logits`), inside the loss's own figures at the loss moments
    held_logits: int = 0
    # LitGPT: the head's output as its last chunk runs, beside that chunk's transient (a 4-bit head's dequantized
    # weight); what it holds when the model's forward returns, before the loss runs (its output and Fabric's fp32
    # copy); and what the loop's `logits` of the previous micro-batch still hold through both: the logits and the
    # inputs bitsandbytes 0.42 keeps in that micro-batch's graph (memory/loss.py _litgpt_chunked)
    head_logits: int = 0
    head_transient: int = 0
    returned_logits: int = 0
    previous_logits: int = 0
    previous_graph: int = 0
    cache_shared: bool = True  # the cache's k/v are the tensors SDPA saved (no repeat_kv copy)
    root_gradients: int = 0  # FSDP: the root unit's trainable gradients, unsharded (parallel.Shares)
    grads_before_root: int = 0  # the sharded gradients resident when the root unit's are reduced
    comm_static: bool = False  # comm_buffers exist from before the first step (DDP buckets, ZeRO-3's bucket)
    own_units: OwnUnits | None = None  # FSDP: the embedding and the head as units of their own (parallel.py)
    carried_grads: int = -1  # gradients resident through accumulation micro-batches (-1: `gradients`)
    kept_gathered: int = 0  # SHARD_GRAD_OP: decoder units gathered in forward and kept until their backward
    head_gather_copy: int = 0  # ZeRO-3 parameter offload: the head's partition copied in for its all-gather
    layer_gather_copy: int = 0  # the same for a decoder layer's (parallel.Shares)
    # The Trainer's evaluation pass (eval_strategy), after an optimizer step and zero_grad: one decoder layer's
    # tensors at the evaluation batch, the head and loss at its peak (loss.no_grad_head), and the KV cache the
    # forward builds where the trainer leaves config.use_cache on (frameworks.eval_builds_cache)
    eval_layer: int = 0
    eval_shared: int = 0
    eval_loss: int = 0
    eval_cache: int = 0
    # compute_metrics: the predictions and labels the evaluation loop holds on the GPU from the earlier batches while
    # the last batch before they move to the CPU runs; what the concatenation of that batch's onto them holds at once
    # (the old whole, the batch's, the new whole); and TRL's extra forward for the logits its fused loss does not make
    eval_kept: int = 0
    eval_concat: int = 0
    eval_logits: int = 0
    eval_concatenates: bool = True  # eval_concat is a concatenation's moment (else the held predictions')


def moments(s: StepInputs) -> list[Moment]:
    """Every candidate peak moment of steps 0 and 1."""
    static = {"weights": s.weights, "quantization_state": s.quant_state, "adapters": s.adapters}
    live_grads = 0 if s.grads_freed_in_backward else s.gradients
    out: list[Moment] = []
    # FSDP2 with the head and the embedding as units of their own: what `weights` holds beyond two decoder units
    # when the head's unit is the one gathered, and when the embedding's is (see the forward moment below)
    own = s.own_units
    own_head, embed_w = (own.head - 2 * own.layer, own.embed - own.layer) if own else (0, 0)
    for step in (0, 1):
        opt = s.optimizer if step else 0
        # micro-batches 2..k run with the grads alive (FSDP no_sync: unsharded, parallel.Shares.carried)
        carried = (s.carried_grads if s.carried_grads >= 0 else live_grads) if s.accumulating else 0
        # buffers allocated at setup are alive in every moment; the others from backward to the step
        base = {**static, "optimizer_states": opt, "gradients": carried + (s.comm_buffers if s.comm_static else 0),
                "workspace": s.workspace}
        # The previous step's outputs are alive until this forward returns; this step's cache is extra
        # where SDPA saved repeat_kv copies instead of the cached k/v.
        own_cache = 0 if s.cache_shared else s.kept_cache
        prev = (s.kept_logits + s.kept_cache) if step else 0
        kept = s.kept_logits + s.held_logits  # logits alive after the loss's backward
        # `weights` holds two decoder units in flight. With the head as its own unit (FSDP2, reshard after
        # forward) the last layer is resharded when the head runs: through the loss and its backward the head is
        # the one unit gathered; backward prefetches the last layer only once the head's backward starts
        # (measured: tests/physics/test_fsdp2_own_units.py).
        head_w = own_head + s.kept_gathered  # SHARD_GRAD_OP: every decoder unit gathered from forward to backward
        out.append(Moment("forward", "cross-entropy on the logits (end of forward)", step, {
            **base, "weights": s.weights + head_w, "activations": s.body + s.shared + s.head_body + own_cache,
            "logits_and_loss": s.loss_saved + s.loss_forward_extra + prev,
            "workspace": s.workspace + s.forward_transient}))
        if s.returned_logits:
            # `logits = model(...)` drops the previous micro-batch's logits only once the forward has returned: from
            # the second micro-batch on (every one of step 1, accumulation's of step 0) both outputs are alive
            prior = int(bool(step or s.accumulating))
            returning = {**base, "weights": s.weights + head_w,
                         "activations": s.body + s.shared + s.head_body + own_cache + prior * s.previous_graph}
            out.append(Moment("forward", "LM head's last chunk (the last micro-batch's logits still held)", step, {
                **returning, "logits_and_loss": s.head_logits + prior * s.previous_logits,
                "workspace": s.workspace + s.head_transient}))
            out.append(Moment("forward", "the model returns its logits (the last micro-batch's still held)", step, {
                **returning, "logits_and_loss": s.returned_logits + prior * s.previous_logits}))
        out.append(Moment("backward", "gradient of the logits (start of backward)", step, {
            **base, "weights": s.weights + head_w + s.head_gather_copy,
            "activations": s.body + s.shared + s.head_body + own_cache,
            "logits_and_loss": s.loss_saved + s.loss_backward_extra + s.kept_logits}))
        if own and own.head_grads and not s.grads_freed_in_backward:
            # FSDP2 post-backward of the head's unit: it reshards the head, then foreach_reduce copies its unsharded
            # gradient into the reduce-scatter input and allocates the 1/n output before freeing the gradient
            # (torch 2.4-2.13 _fsdp_collectives.py foreach_reduce), with the last layer prefetched and the body's
            # activations still alive (measured: tests/physics/test_fsdp2_own_units.py)
            out.append(Moment("backward", "LM head's reduce-scatter (FSDP unit of its own)", step, {
                **base, "weights": s.weights - own.layer + s.kept_gathered, "gradients": carried + 2 * own.head_grads
                + own.head_grads // own.world + (s.comm_buffers if s.comm_static else 0),
                "activations": s.body + s.shared + s.head_body + own_cache, "logits_and_loss": kept}))
        # optimizer-in-backward frees each gradient in its hook, but a tied head and embedding are one parameter
        # with one AccumulateGrad: the head's gradient waits in its input buffer until the embedding's arrives
        # (measured: tests/physics/test_tied_optim_in_bwd.py)
        held = s.grads_freed_in_backward and bool(s.tied_gradient)
        head_grads = carried or (0 if s.grads_freed_in_backward and not held else s.head_gradients)
        out.append(Moment("backward", "last decoder layer (backward through the body)", step, {
            **base, "weights": s.weights + s.kept_gathered + s.layer_gather_copy,
            "gradients": head_grads + s.comm_buffers,
            "activations": s.body + s.shared + s.layer_backward + own_cache, "logits_and_loss": kept,
            "workspace": s.workspace + s.backward_transient}))
        if s.first_layer and not s.grads_freed_in_backward:
            # memory-model.md §9.3: the sweep's other end: layer 0 (recomputed under checkpointing) is about to
            # be differentiated with the gradients of every later layer and of the head alive; its own and the
            # embedding's gradients come after it.
            # under FSDP the head's gradient waits, unsharded, for the root unit's reduce-scatter
            before = (max(s.grads_before_root - s.layer_gradients, 0) + s.head_gradients if s.root_gradients
                      else s.gradients - s.embed_gradient - s.layer_gradients)
            out.append(Moment("backward", "first decoder layer (end of backward)", step, {
                **base, "weights": s.weights + embed_w, "gradients": (carried or before) + s.comm_buffers,
                "activations": s.shared + s.first_layer + s.kept_cache, "logits_and_loss": kept,
                "workspace": s.workspace + s.backward_transient}))
        if own and own.embed_grads and not s.grads_freed_in_backward:
            # the embedding's unit after its backward, resharded like layer 0: its gradient, the reduce-scatter
            # input and output
            out.append(Moment("backward", "input embedding's reduce-scatter (FSDP unit of its own)", step, {
                **base, "weights": s.weights - 2 * own.layer,
                "gradients": (carried or s.grads_before_root) + 2 * own.embed_grads + own.embed_grads // own.world,
                "activations": s.shared + s.kept_cache, "logits_and_loss": kept}))
        if s.root_gradients and not s.grads_freed_in_backward:
            # FSDP's root unit (embeddings, final norm, LM head) is one flat parameter whose views' gradients
            # autograd holds until the last of them, the embedding's, arrives; then it concatenates them into the
            # flat gradient for the reduce-scatter: the pieces and the flat copy are alive at once (measured with
            # FSDP1 on the CPU, tests/physics/test_fsdp_root_grad.py; FSDP2's foreach_reduce copies into one
            # reduce-scatter buffer the same way).
            out.append(Moment("backward", "FSDP root unit's flat gradient (end of backward)", step, {
                **base, "gradients": (carried or s.grads_before_root) + 2 * s.root_gradients,
                "activations": s.shared + s.kept_cache, "logits_and_loss": kept}))
        if s.tied_gradient and not s.grads_freed_in_backward:
            out.append(Moment("backward", "embedding backward (tied head and embedding gradients)", step, {
                **base, "gradients": s.gradients + s.tied_gradient + s.comm_buffers, "activations": s.kept_cache,
                "logits_and_loss": kept}))
        if held:  # the tied sum (its two inputs and the result), stepped and freed by the weight's hook
            out.append(Moment("backward", "embedding backward (tied head and embedding gradients)", step, {
                **base, "gradients": s.head_gradients + s.tied_gradient, "activations": s.kept_cache,
                "logits_and_loss": kept}))
        if s.grads_freed_in_backward:
            # torchtune optimizer-in-backward: states exist from the first backward; no full-grad moment.
            continue
        new_states = s.optimizer if step == 0 else 0
        out.append(Moment("optimizer", "optimizer.step(): first step allocates its states" if step == 0
                          else "optimizer.step()", step, {
            **base, "gradients": s.gradients + s.comm_buffers, "optimizer_states": opt + new_states,
            "activations": s.kept_cache, "logits_and_loss": kept,
            "workspace": s.workspace + s.optimizer_temp}))
    if s.eval_loss:
        out += _evaluation(s, static, own_head)
    return out


def _evaluation(s: StepInputs, static: dict[str, int], head_w: int) -> list[Moment]:
    """The evaluation pass's moments: a forward without gradients at the evaluation batch, run by the Trainer after
    an optimizer step (zero_grad has freed the gradients; the optimizer states stay). Its layers keep nothing but
    the KV cache, if one is built; its peak is one layer's tensors or the loss over the evaluation batch's logits
    (head_w: what `weights` holds beyond two decoder units while the head's own FSDP unit is gathered)."""
    # SHARD_GRAD_OP reshards a unit only in its backward: a forward without one leaves every decoder unit gathered
    # (measured: tests/physics/test_fsdp_shard_grad_op.py), from the last layer on, until the next step's backward
    weights = s.weights + s.kept_gathered
    base = {**static, "weights": weights, "optimizer_states": s.optimizer,
            "gradients": s.comm_buffers if s.comm_static else 0, "workspace": s.workspace}
    out = [Moment("eval", "evaluation forward: a decoder layer (no gradients)", 1, {
               **base, "activations": s.eval_shared + s.eval_layer + s.eval_cache, "logits_and_loss": s.eval_kept}),
           Moment("eval", "evaluation forward: cross-entropy on the evaluation batch's logits", 1, {
               **base, "weights": weights + head_w, "activations": s.eval_shared + s.eval_cache,
               "logits_and_loss": s.eval_loss + s.eval_kept})]
    if s.eval_logits:
        out.append(Moment("eval", "evaluation forward: the logits made again for compute_metrics", 1, {
            **base, "weights": weights + head_w, "logits_and_loss": s.eval_logits + s.eval_kept}))
    if s.eval_concat:
        out.append(Moment("eval", EVAL_CONCAT if s.eval_concatenates else EVAL_HELD, 1,
                          {**base, "logits_and_loss": s.eval_concat}))
    return out


def peak(ms: list[Moment]) -> Moment:
    """The moment with the most bytes live."""
    return max(ms, key=lambda m: m.total)
