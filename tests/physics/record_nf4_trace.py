"""Record what torchao's real to_nf4 allocates and frees on the CPU, per torchao release (the fixture
tests/physics/data/nf4_trace.json that tests/physics/test_nf4_chunks.py replays the engine against).

torchao is not a dependency of this project (no torchao wheel imports cleanly for every release on one torch),
so this is run by hand, once per release, on the release's own dtypes/nf4tensor.py loaded as a standalone
module (it imports only torch):

    pip install --no-deps --target /tmp/ao-0.5.0 torchao==0.5.0
    python tests/physics/record_nf4_trace.py 0.5.0 /tmp/ao-0.5.0/torchao/dtypes/nf4tensor.py

or, from the pytorch/ao repository, `git show v0.3.0:torchao/dtypes/nf4tensor.py > /tmp/nf4_v03.py`.
It adds (or replaces) the release's entry in the fixture: the (op, bytes) sequence of one to_nf4 of a bf16
weight with torchao's CHUNK_SIZE as released and with CHUNK_SIZE patched small (several chunks, the last one
partial), and of one get_original_weight.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import harness

FIXTURE = pathlib.Path(__file__).parent / "data" / "nf4_trace.json"
SHAPE = (288, 1024)  # N = 294,912 = 4.5 * 65,536: the patched chunk leaves a partial last chunk
SMALL_CHUNK = 65_536


def _load(path: str):
    spec = importlib.util.spec_from_file_location("nf4tensor_under_trace", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _trace(fn, *held):
    with harness.LiveMem() as tr:
        for t in held:
            tr.add(t)
        out = fn()
    return [[op, n] for op, n in tr.events[len(held):]], out


def record(path: str) -> dict:
    """The traces of one nf4tensor.py."""
    mod = _load(path)
    chunk = getattr(mod, "CHUNK_SIZE", None)
    torch.manual_seed(0)
    w = torch.randn(*SHAPE, dtype=torch.bfloat16)
    entry: dict = {"numel": w.numel(), "chunk_size": chunk}
    entry["to_nf4"], q = _trace(lambda: mod.to_nf4(w), w)
    if chunk is not None:
        mod.CHUNK_SIZE = SMALL_CHUNK
        entry["small_chunk"] = SMALL_CHUNK
        entry["to_nf4_small_chunk"], q2 = _trace(lambda: mod.to_nf4(w), w)
        mod.CHUNK_SIZE = chunk
        assert torch.equal(q.quantized_data, q2.quantized_data)  # chunking changes memory, not the codes
    inner = [q.quantized_data, q.quantized_scalers, q.quantization_factor, q.scaler_mean, q.nf4]
    entry["get_original_weight"], _ = _trace(q.get_original_weight, *inner)
    entry["kept"] = {k: getattr(q, k).untyped_storage().nbytes()
                     for k in ("quantized_data", "quantized_scalers", "quantization_factor", "scaler_mean", "nf4")}
    return entry


def main(argv: list[str]) -> int:
    """record_nf4_trace.py VERSION PATH_TO_NF4TENSOR_PY: add VERSION's traces to the fixture."""
    version, path = argv
    data = json.loads(FIXTURE.read_text()) if FIXTURE.exists() else {}
    source = f"torchao=={version} (PyPI wheel), torchao/dtypes/nf4tensor.py"
    data[version] = {"source": source, "torch": torch.__version__, **record(path)}
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps(dict(sorted(data.items())), indent=1) + "\n")
    e = data[version]
    print(version, "N", e["numel"], "chunk", e["chunk_size"], "events", len(e["to_nf4"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
