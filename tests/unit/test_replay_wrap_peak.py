"""The replay's cache overhead is measured above the step's own allocated peak, not the FSDP wrap's.

The wrap (memory/fsdp_init.py) holds a unit's tensors, its flat parameter and its shard at once, which can pass
everything the step later allocates; what it leaves cached still counts in reserved (reserved only grows), but
the allocated peak the engine adds the overhead to is the step's (tests below: sizes derived by hand).
"""

from __future__ import annotations

from sizing.memory.replay import Replay, replay

MiB = 2**20


def _record(**change: object) -> Replay:
    base: dict[str, object] = dict(
        static=(32 * MiB,), layers=1, saved=(4 * MiB,), layer_constant=0, checkpoint=0, forward_transient=0,
        backward_transient=0, backward_events=(), gathered_unit=0, head_saved=(), loss_forward=0, loss_backward=(),
        head_grads=(), layer_grads=(), comm_buffer=0, comm_static=False, states_per_grad=0.0, temp_per_grad=0.0,
        accumulating=False)
    base.update(change)
    return Replay(**base)  # type: ignore[arg-type]


def test_the_wrap_peak_is_not_the_steps() -> None:
    # The wrap of one 64 MiB unit without broadcast: the unit's tensor (64 MiB segment), the flat parameter (a
    # second 64 MiB segment: the first is in use), the 32 MiB shard (a third segment), then both 64 MiB blocks freed
    # and the shard freed; the 32 MiB static shard takes the shard's slot back. Reserved: 160 MiB. The step: the
    # static 32 MiB and one layer's 4 MiB saved tensor (carved from a cached 64 MiB segment), so its allocated peak
    # is 36 MiB, whatever the wrap reached (160 MiB).
    allocated, reserved, _ = replay(_record(init_units=((64 * MiB,),), init_shards=(32 * MiB,), init_sync=False),
                                    False)
    assert allocated == 36 * MiB
    assert reserved == 160 * MiB


def test_without_a_wrap_the_peak_is_unchanged() -> None:
    # No wrap: the static 32 MiB segment, then a 4 MiB segment for the saved tensor (sizes above 1 MiB round to
    # 2 MiB pages; a request below 10 MiB gets a 20 MiB segment in PyTorch's allocator: kLargeBuffer).
    allocated, reserved, _ = replay(_record(), False)
    assert allocated == 36 * MiB
    assert reserved == 32 * MiB + 20 * MiB
