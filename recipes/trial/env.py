# The process's surroundings: the token (never written), ranks, progress lines, versions, hardware, driver memory.
from __future__ import annotations

import datetime as dt
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
from typing import Any


def token() -> str | None:
    """The Hugging Face token: HF_TOKEN, else the login cache (None lets the hub look itself)."""
    value = os.environ.get("HF_TOKEN", "").strip()
    if value:
        return value
    try:
        from huggingface_hub import get_token

        cached = get_token()
    except Exception:
        return None
    return cached.strip() if isinstance(cached, str) and cached.strip() else None


def scrub_text(text: str, secret: str | None) -> str:
    """The text with every occurrence of the token's value replaced (applied to strings, never to JSON text).
    An occurrence inside a longer word of token characters is left alone: a token cannot hide there, and a
    short test token such as "0" must not rewrite "H100" or "80GB"."""
    if not secret:
        return text
    pattern = r"(?<![A-Za-z0-9_])" + re.escape(secret) + r"(?![A-Za-z0-9_])"
    return re.sub(pattern, "***", text)


def scrub(value: Any, secret: str | None) -> Any:
    """A JSON-ready value with the token removed from every string (keys included); numbers are left alone."""
    if not secret:
        return value
    if isinstance(value, str):
        return scrub_text(value, secret)
    if isinstance(value, dict):
        return {scrub_text(str(k), secret): scrub(v, secret) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v, secret) for v in value]
    return value


def rank() -> tuple[int, int, int]:
    """(rank, world size, local rank) as torchrun / accelerate launch set them."""
    env = os.environ
    return int(env.get("RANK", "0")), int(env.get("WORLD_SIZE", "1")), int(env.get("LOCAL_RANK", "0"))


def progress(message: str) -> None:
    """One line on stderr, prefixed with the rank under a multi-process launch; the token scrubbed."""
    r, world, _ = rank()
    prefix = "[trial]" if world == 1 else f"[trial rank {r}]"
    print(scrub_text(f"{prefix} {message}", token()), file=sys.stderr, flush=True)


def gib(n: float | None) -> str:
    """Bytes as GiB for a progress line."""
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


def now() -> str:
    """UTC time, seconds precision."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


def version(dist: str) -> str | None:
    """The installed version of a distribution, or None."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _nvml() -> Any:
    try:
        import pynvml  # type: ignore[import-not-found,unused-ignore]

        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


def _nvidia_smi(query: str) -> list[str] | None:
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        proc = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip().splitlines() if proc.returncode == 0 else None


def _nvidia_smi_apps() -> dict[int, int] | None:
    """pid -> used bytes of the compute processes nvidia-smi lists (a container may hide the pids)."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        proc = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    out: dict[int, int] = {}
    for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
        pid, _, used = line.partition(",")
        if pid.strip().isdigit() and used.strip().replace(".", "", 1).isdigit():
            out[int(pid)] = int(float(used)) * 2**20
    return out


def versions() -> dict[str, Any]:
    """The software the figures were measured with."""
    import torch

    driver: str | None = None
    nvml = _nvml()
    if nvml is not None:
        try:
            raw = nvml.nvmlSystemGetDriverVersion()
            driver = raw.decode() if isinstance(raw, bytes) else str(raw)
        except Exception:
            driver = None
    if driver is None:
        lines = _nvidia_smi("driver_version")
        driver = lines[0].strip() if lines else None
    return {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "driver": driver, "transformers": version("transformers"), "peft": version("peft"),
            "accelerate": version("accelerate"), "bitsandbytes": version("bitsandbytes"), "trl": version("trl")}


def hardware() -> dict[str, Any]:
    """The GPUs this process sees, its rank and the launched world size."""
    import torch

    r, world, local = rank()
    gpus: list[dict[str, Any]] = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            prop = torch.cuda.get_device_properties(i)
            gpus.append({"index": i, "name": prop.name, "total_memory_bytes": int(prop.total_memory),
                         "compute_capability": f"{prop.major}.{prop.minor}"})
    device = gpus[local]["name"] if local < len(gpus) else None
    return {"gpu_count": len(gpus), "gpus": gpus, "device_name": device, "cpu_count": os.cpu_count() or 0,
            "platform": platform.platform(), "rank": r, "world_size": world, "local_rank": local}


def _physical_index(device_index: int) -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    parts = [p.strip() for p in visible.split(",") if p.strip()]
    if parts and device_index < len(parts) and parts[device_index].isdigit():
        return int(parts[device_index])
    return device_index


def device_used_bytes(device_index: int) -> tuple[int | None, str]:
    """Memory the driver reports for this process (what nvidia-smi lists per process); the whole GPU only
    when the driver cannot tell processes apart, and then the source says so."""
    nvml = _nvml()
    if nvml is not None:
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(_physical_index(device_index))
            for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if proc.pid == os.getpid() and proc.usedGpuMemory is not None:
                    return int(proc.usedGpuMemory), "pynvml: this process"
            return int(nvml.nvmlDeviceGetMemoryInfo(handle).used), "pynvml: whole GPU (process not listed)"
        except Exception:
            pass
    apps = _nvidia_smi_apps()
    if apps is not None and os.getpid() in apps:
        return apps[os.getpid()], "nvidia-smi: this process"
    lines = _nvidia_smi("memory.used")
    if lines:
        idx = _physical_index(device_index)
        if idx < len(lines):
            return int(float(lines[idx])) * 2**20, "nvidia-smi: whole GPU"
    return None, "neither pynvml nor nvidia-smi is available"
