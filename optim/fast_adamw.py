"""FastAdamW: the lesson's AdamW (adamw.py) with its update run fused, in C on the CPU or compiled by
torch.compile elsewhere.

It subclasses AdamW and overrides one method, `update_group`, which applies one parameter group's updates:
it applies those a fast path takes and hands the rest to the lesson's loop of `adamw_update`. Which way a
parameter goes (bench/optim_speed.py times them on bert-base's 199 tensors, 2 CPU cores):

* float32, on the CPU, contiguous, unless fused=False: adamw_kernel.c, built once with the system C compiler
  and called through ctypes, one call per group. Level with torch's fused AdamW (0.98-0.99x), where the
  lesson's loop takes about 4.5x as long.
* every other contiguous tensor (a GPU, float64), and float32 too where the kernel cannot be built or
  fused=False: `adamw_update` compiled by torch.compile, which fuses its passes over memory into one kernel
  per tensor. 1.3x torch's fused step on the CPU, where each tensor costs a compiled call.
* a strided view, and everything once compiling has failed: nothing here; the lesson's loop runs it.

All of them give torch.optim.AdamW's numbers within float rounding (tests/test_adamw.py). Where the kernel
cannot be built (no C compiler or OpenMP, a failed build or load), this module warns once and compiles; where
compiling fails (no C++ compiler for Inductor, an unsupported platform), it warns once and leaves every update
to the lesson's loop, which gives the same numbers, slower.

The jobs train with FastAdamW (tasks/training/settings.py chooses it). The student handout leaves this
module and its kernel out (the kernel restates the exercise's answer): there the jobs train with AdamW, which
runs the student's `adamw_update` as they wrote it, never compiled behind their back (a compiled update would
report their mistakes through Inductor's tracebacks, and could reject correct Python that torch.compile
cannot trace).

Read next: adamw_kernel.c (the kernel this module builds).
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
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from optim import adamw
from optim.adamw import AdamW, Update



class FastAdamW(AdamW):
    """AdamW (adamw.py), the same arguments and numbers, its update fused; see the module docstring.

    fused: None or True (the default), float32 tensors on the CPU go to the C kernel; False, they are
    compiled like every other tensor. A parameter group may set its own.
    """

    def __init__(self, params: Iterable[Tensor] | Iterable[dict[str, Any]], *args: Any,
                 fused: bool | None = None, **kwargs: Any) -> None:
        _check_fused("FastAdamW", fused)
        self.fused = fused  # read by add_param_group, which AdamW.__init__ calls
        super().__init__(params, *args, **kwargs)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        group.setdefault("fused", self.fused)
        _check_fused(f"FastAdamW param group {len(self.param_groups) - 1}", group["fused"])

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A state dict saved by AdamW or torch.optim.AdamW loads too (None: the default)."""
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("fused", None)

    def update_group(self, updates: list[Update], hyper: dict[str, float], group: dict[str, Any]) -> None:
        """The updates the C kernel takes, then those torch.compile takes; the rest by AdamW's loop."""
        if group["fused"] is not False:
            native = [u for u in updates if kernel_applies(u[:5])]
            if native and kernel_step(native, **hyper):
                updates = [u for u in updates if not kernel_applies(u[:5])]
        # adamw.adamw_update looked up at each step: the function the lesson's loop runs, patched or not
        super().update_group(compiled_step(updates, hyper, adamw.adamw_update), hyper, group)


def _check_fused(where: str, fused: Any) -> None:
    if not any(fused is allowed for allowed in (None, True, False)):
        raise ValueError(f"{where}: fused must be None (the C kernel where it applies), True (the same) or "
                         f"False (never the C kernel), got {fused!r}")


# ----- the C kernel -------------------------------------------------------------------------------

KERNEL_SOURCE = Path(__file__).with_name("adamw_kernel.c")
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
# Why the kernel is unavailable, once known; None while it works or is still untried.
KERNEL_FAILURE: str | None = None


def cache_dir() -> Path:
    """Where built libraries are kept: $MINBERT_CACHE, else $XDG_CACHE_HOME/minbert, else ~/.cache/minbert."""
    if os.environ.get("MINBERT_CACHE"):
        return Path(os.environ["MINBERT_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "minbert"


def build_command(compiler: str, output: Path) -> list[str]:
    """The compiler's command line for this machine."""
    arch = ARCH_FLAGS.get(torch.backends.cpu.get_cpu_capability(), ()) if platform.machine() in (
        "x86_64", "AMD64") else ()
    return [compiler, *FLAGS, *arch, str(KERNEL_SOURCE), "-o", str(output)]


def build() -> Path:
    """Compile adamw_kernel.c into the cache folder unless it is there already; return the library's path.

    The library is named by a hash of the source, the flags, the compiler and the CPU's vector extension,
    and written atomically (a temporary file, then a rename), so processes that start together, a changed
    source or another machine sharing the home folder never load a wrong or half-written library. It takes
    about a second. Raises RuntimeError naming the command and the compiler's message when there is no
    compiler or the build fails."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler found (set CC, or install cc/gcc)")
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as error:
        raise RuntimeError(f"the C compiler {compiler!r} does not run: {error}") from error
    key = hashlib.sha256("\0".join([KERNEL_SOURCE.read_text(), *build_command(compiler, Path("lib.so")),
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
    """The built kernel, building it on first call; None (and KERNEL_FAILURE says why) where that fails."""
    global _LIBRARY, KERNEL_FAILURE
    if KERNEL_FAILURE is not None:
        return None
    if _LIBRARY is not None:
        return _LIBRARY
    try:
        library = ctypes.CDLL(str(build()))
        function = library.adamw_group_step
        function.argtypes = [ctypes.c_int64, *[_ARRAY_P] * 5, ctypes.POINTER(ctypes.c_int64), _FLOAT_P,
                             _FLOAT_P, *[ctypes.c_float] * 5, ctypes.c_int]
        function.restype = None
    except (OSError, RuntimeError, subprocess.SubprocessError, AttributeError) as error:
        KERNEL_FAILURE = " ".join(f"{type(error).__name__}: {error}".split())[:400]
        warnings.warn(f"FastAdamW: the C kernel is unavailable ({KERNEL_FAILURE}); using the torch.compile'd "
                      "update instead (the same numbers)", RuntimeWarning, stacklevel=5)
        return None
    _LIBRARY = library
    return library


def kernel_applies(tensors: Sequence[Tensor | None]) -> bool:
    """True when the kernel can update these tensors: float32, on the CPU, contiguous (None skipped)."""
    return all(t is None or (t.dtype == torch.float32 and t.device.type == "cpu" and t.is_contiguous())
               for t in tensors)


def kernel_step(updates: Sequence[Update], *, lr: float, beta1: float, beta2: float, eps: float,
                weight_decay: float) -> bool:
    """One AdamW step of every update in `updates` by the C kernel, all with one group's hyper-parameters;
    False, touching nothing, where the kernel is unavailable.

    Every update's tensors must pass `kernel_applies`; max_exp_avg_sq is None for all (no amsgrad) or for
    none. The scalars are computed here in Python's double precision and rounded to float32 once, as torch's
    eager operations round a Python number where it meets a float32 tensor."""
    library = _load()
    if library is None:
        return False
    count = len(updates)

    def pointers(column: int) -> ctypes.Array:
        return (ctypes.c_void_p * count)(*[u[column].data_ptr() for u in updates])

    amsgrad = updates[0][4] is not None
    if any((u[4] is not None) != amsgrad for u in updates):
        raise ValueError("kernel_step: max_exp_avg_sq must be given for every tensor or for none")
    library.adamw_group_step(
        count, pointers(0), pointers(1), pointers(2), pointers(3), pointers(4) if amsgrad else None,
        (ctypes.c_int64 * count)(*[u[0].numel() for u in updates]),
        (ctypes.c_float * count)(*[lr / (1 - beta1**u[5]) for u in updates]),
        (ctypes.c_float * count)(*[(1 - beta2**u[5]) ** 0.5 for u in updates]),
        1 - lr * weight_decay, 1 - beta1, beta2, 1 - beta2, eps, torch.get_num_threads())
    return True


# ----- adamw_update compiled by torch.compile ---------------------------------------------------------

# The function compiled and its compiled form, made on first use; and why compiling failed, remembered so
# that we warn once.
_COMPILED: tuple[Callable[..., None], Callable[..., None]] | None = None
COMPILE_FAILURE: str | None = None
# Inductor options, both measured on CPU (bench/optim_speed.py, bert-base shapes):
# - realize_opcount_threshold: Inductor inlines a scalar computed from the step, such as 1 - beta2^t,
#   into the loop over the tensor, where the C++ compiler may not hoist pow (Inductor keeps libm's errno
#   semantics): pow ran once per 16 elements, and the step took 3.5x torch's fused one. At 1, such a
#   scalar is computed once per call, into a 0-dim buffer that the loop reads.
# - cpp.dynamic_threads: one kernel serves every size, and without this whether its loop runs on all
#   threads was decided by the size it was first compiled for (a 768-element bias: one thread, 2x slower
#   on a large tensor), a choice the on-disk compile cache even carried over to later runs.
_INDUCTOR_OPTIONS = {"realize_opcount_threshold": 1, "cpp.dynamic_threads": True}


def compiled_step(updates: list[Update], hyper: dict[str, float],
                  update: Callable[..., None]) -> list[Update]:
    """`update` (`adamw_update`), compiled, of each update whose tensors are contiguous; return the others
    (all of them, from the first failure on, once compiling has failed)."""
    # See _update_compiled for why the numbers go in as tensors.
    scalars = {name: torch.tensor(value, dtype=torch.float64) for name, value in hyper.items()}
    step_tensors: dict[int, Tensor] = {}
    left = []
    for number, (*tensors, step) in enumerate(updates):
        if not all(t is None or t.is_contiguous() for t in tensors):  # flat views need contiguous memory
            left.append(updates[number])
            continue
        if step not in step_tensors:
            step_tensors[step] = torch.tensor(float(step), dtype=torch.float64)
        # Flat views: the update is element-wise, and one rank means one compiled kernel.
        flat = [t if t is None else t.view(-1) for t in tensors]
        if not _update_compiled(update, *flat, step_tensors[step], scalars):
            return left + updates[number:]
    return left


def _update_compiled(update: Callable[..., None], param: Tensor, grad: Tensor, exp_avg: Tensor,
                     exp_avg_sq: Tensor, max_exp_avg_sq: Tensor | None, step: Tensor,
                     scalars: dict[str, Tensor]) -> bool:
    """`update` (`adamw_update`) of one parameter, compiled by torch.compile; False where compiling is
    unavailable.

    Inductor fuses the update's seven passes over memory into one kernel per tensor (C++ on CPU, Triton
    on GPU), which is what makes torch's fused AdamW fast. fullgraph=True: a graph break would run part of
    the update eagerly, so any failure comes while compiling, before a tensor is written, and the caller
    redoes the update on the readable path. dynamic=True: one kernel serves every size of a given rank
    and dtype, instead of a compilation per shape.

    step and the hyper-parameters come as 0-dim float64 tensors: as Python numbers, torch.compile would
    recompile whenever the learning rate or the step changes, and torch 2.13 miscompiles the update when
    it makes them symbolic instead (the recompiled kernel keeps the first learning rate inside
    lr / (1 - beta1^t): silently wrong numbers). float64 keeps the bias corrections as exact as Python's
    floats; each is rounded to the tensor's dtype where it meets it, as in eager mode. An update written
    with `math` functions of these numbers cannot be traced so: it fails here, and runs as written.
    """
    global _COMPILED, COMPILE_FAILURE
    if COMPILE_FAILURE is not None:
        return False
    try:
        if _COMPILED is None or _COMPILED[0] is not update:
            compiled = torch.compile(update, fullgraph=True, dynamic=True, options=_INDUCTOR_OPTIONS)
            _COMPILED = (update, compiled)
        _COMPILED[1](param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, **scalars)
    except Exception as error:  # no C++ compiler, an unsupported platform, the recompilation limit, ...
        COMPILE_FAILURE = " ".join(f"{type(error).__name__}: {error}".split())[:300]
        warnings.warn(f"FastAdamW: torch.compile of adamw_update failed ({COMPILE_FAILURE}); using the readable "
                      "per-parameter update from now on (the same numbers, slower)", RuntimeWarning,
                      stacklevel=5)
        return False
    return True
