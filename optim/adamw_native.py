"""AdamW's fast path on the CPU: adamw_kernel.c, compiled once with the system C compiler, called with ctypes.

`AdamW.step` hands this module the float32 tensors of a parameter group that live on the CPU and are
contiguous; everything else (a GPU, float64 or bfloat16 weights, a strided view) takes the torch.compile'd
path in adamw.py. The kernel is the same update as `adamw_update`, one pass over memory per tensor and one
thread team for the whole group (see the C file for why that is faster than torch's fused step).

Building: on first use, `cc` (or $CC) compiles adamw_kernel.c into a shared library in the cache folder
($MINBERT_CACHE, else $XDG_CACHE_HOME/minbert, else ~/.cache/minbert), named by a hash of the source, the
flags, the compiler and the CPU's vector extension, and written atomically (a temporary file, then a
rename), so processes that start together, a changed source or another machine sharing the home folder
never load a wrong or half-written library. It takes about a second. Where there is no C compiler or
OpenMP, or the build or the load fails, `group_step` returns False from then on and the optimizer warns
once and uses the compiled path. The student handout leaves out adamw_kernel.c (it restates the exercise's
answer); without it, the compiled path runs the student's own `adamw_update`, silently.

Read next: adamw.py (where the paths are chosen).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

SOURCE = Path(__file__).with_name("adamw_kernel.c")
# -O3 vectorises the loop; -fno-math-errno lets it use the vector square root (sqrtf need not set errno);
# -ffp-contract=off keeps the compiler from fusing a multiply and an add that torch rounds twice (the kernel
# asks for an FMA, fmaf, exactly where torch's own kernels use one).
FLAGS = ("-O3", "-fopenmp", "-fno-math-errno", "-ffp-contract=off", "-shared", "-fPIC")
# Vector extensions by torch's reading of the CPU. Not -march=native: a library cached in a home folder
# shared by machines with different CPUs must not use instructions that one of them lacks.
ARCH_FLAGS = {"AVX512": ("-mavx512f", "-mavx512vl", "-mfma", "-mprefer-vector-width=512"),
              "AVX2": ("-mavx2", "-mfma")}

_FLOAT_P = ctypes.POINTER(ctypes.c_float)
_ARRAY_P = ctypes.POINTER(ctypes.c_void_p)
_LIBRARY: ctypes.CDLL | None = None
FAILURE: str | None = None  # why the kernel is unavailable, once known; None while it works (or is untried)


def cache_dir() -> Path:
    """Where built libraries are kept: $MINBERT_CACHE, else $XDG_CACHE_HOME/minbert, else ~/.cache/minbert."""
    if os.environ.get("MINBERT_CACHE"):
        return Path(os.environ["MINBERT_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "minbert"


def _compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def build_command(compiler: str, output: Path) -> list[str]:
    """The compiler's command line for this machine."""
    arch = ARCH_FLAGS.get(torch.backends.cpu.get_cpu_capability(), ()) if platform.machine() in (
        "x86_64", "AMD64") else ()
    return [compiler, *FLAGS, *arch, str(SOURCE), "-o", str(output)]


def build() -> Path:
    """Compile adamw_kernel.c into the cache folder unless it is there already; return the library's path.

    Raises RuntimeError naming the command and the compiler's message when there is no compiler or the
    build fails."""
    compiler = _compiler()
    if compiler is None:
        raise RuntimeError("no C compiler found (set CC, or install cc/gcc)")
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as error:
        raise RuntimeError(f"the C compiler {compiler!r} does not run: {error}") from error
    key = hashlib.sha256("\0".join([SOURCE.read_text(), *build_command(compiler, Path("lib.so")),
                                    version]).encode()).hexdigest()[:16]
    library = cache_dir() / f"adamw_kernel-{key}.so"
    if library.exists():
        return library
    library.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".adamw_kernel-", suffix=".so", dir=library.parent)
    os.close(handle)
    try:
        command = build_command(compiler, Path(temporary))
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            message = " ".join((done.stderr or done.stdout).split())[:300]
            raise RuntimeError(f"`{' '.join(command)}` failed: {message}")
        os.replace(temporary, library)  # atomic: other processes see no library or a whole one
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    return library


def _load() -> ctypes.CDLL | None:
    """The built kernel, building it on first call; None (and FAILURE says why) where that fails."""
    global _LIBRARY, FAILURE
    if FAILURE is not None:
        return None
    if _LIBRARY is not None:
        return _LIBRARY
    if not SOURCE.exists():
        FAILURE = f"{SOURCE.name} is not here (the student handout leaves it out)"
        return None
    try:
        library = ctypes.CDLL(str(build()))
        function = library.adamw_group_step
        function.argtypes = [ctypes.c_int64, *[_ARRAY_P] * 5, ctypes.POINTER(ctypes.c_int64), _FLOAT_P,
                             _FLOAT_P, *[ctypes.c_float] * 5, ctypes.c_int]
        function.restype = None
    except (OSError, RuntimeError, subprocess.SubprocessError, AttributeError) as error:
        FAILURE = " ".join(f"{type(error).__name__}: {error}".split())[:400]
        warnings.warn(f"AdamW: the C kernel is unavailable ({FAILURE}); using the torch.compile'd update "
                      "instead (the same numbers)", RuntimeWarning, stacklevel=4)
        return None
    _LIBRARY = library
    return library


def applies(tensors: Sequence[Tensor | None]) -> bool:
    """True when the kernel can update these tensors: float32, on the CPU, contiguous (None skipped)."""
    return all(t is None or (t.dtype == torch.float32 and t.device.type == "cpu" and t.is_contiguous())
               for t in tensors)


def group_step(updates: Sequence[tuple[Tensor, Tensor, Tensor, Tensor, Tensor | None, int]], *, lr: float,
               beta1: float, beta2: float, eps: float, weight_decay: float) -> bool:
    """One AdamW step of every (param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq or None, step) in updates,
    all with one group's hyper-parameters; False, touching nothing, where the kernel is unavailable.

    Every tensor must pass `applies`; max_exp_avg_sq is None for all (no amsgrad) or for none. The scalars
    are computed here in Python's double precision and rounded to float32 once, as torch's eager operations
    round a Python number where it meets a float32 tensor."""
    library = _load()
    if library is None:
        return False
    count = len(updates)

    def pointers(column: int) -> ctypes.Array:
        return (ctypes.c_void_p * count)(*[u[column].data_ptr() for u in updates])

    amsgrad = updates[0][4] is not None
    if any((u[4] is not None) != amsgrad for u in updates):
        raise ValueError("group_step: max_exp_avg_sq must be given for every tensor or for none")
    library.adamw_group_step(
        count, pointers(0), pointers(1), pointers(2), pointers(3), pointers(4) if amsgrad else None,
        (ctypes.c_int64 * count)(*[u[0].numel() for u in updates]),
        (ctypes.c_float * count)(*[lr / (1 - beta1**u[5]) for u in updates]),
        (ctypes.c_float * count)(*[(1 - beta2**u[5]) ** 0.5 for u in updates]),
        1 - lr * weight_decay, 1 - beta1, beta2, 1 - beta2, eps, torch.get_num_threads())
    return True
