"""Every instruction-set path of the keystroke kernels' products gives the same bytes and sums (and their attention the
same softmax to 1e-5).

The kernel is built with -march=native, so a host runs only its own CPU's path (AVX512-VNNI, AVX2 or plain C). These
tests build `int8_products_check.c` once per path this CPU can run, so that a VNNI host's CI also checks the AVX2
code, and each build compares `quantize_u8` and the int8 and int4 products with integer sums, and the attention over
the cache with double precision."""

import platform
import subprocess
from pathlib import Path

import pytest

from tf2rnn_hf.inference.kernels import find_compiler
from tf2rnn_hf.utils import cpu_flags

CHECK = Path(__file__).with_name("int8_products_check.c")
POOL = Path(__file__).parents[2] / "src" / "tf2rnn_hf" / "inference" / "kernels" / "pool.c"  # the step's helper thread
X86 = platform.machine() in ("x86_64", "AMD64")


def _paths():
    """The -march values to build for: plain x86-64 C, haswell (AVX2, FMA) and the host's own, each skipped where this
    CPU cannot run it."""
    flags = cpu_flags().split()
    return [
        pytest.param("x86-64", marks=pytest.mark.skipif(not X86, reason="an x86-64 build; this CPU is not x86")),
        pytest.param("haswell", marks=pytest.mark.skipif(not (X86 and {"avx2", "fma"} <= set(flags)),
                                                         reason="this CPU cannot run AVX2 and FMA code")),
        pytest.param("native"),
    ]


@pytest.mark.skipif(find_compiler() is None, reason="no C compiler to build the check")
@pytest.mark.parametrize("march", _paths())
def test_each_instruction_set_path_gives_the_same_bytes_and_sums(march, tmp_path):
    binary = tmp_path / f"check-{march}"
    build = subprocess.run([find_compiler(), "-O3", f"-march={march}", "-pthread", str(CHECK), str(POOL), "-o",
                            str(binary), "-lm"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-2000:]
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr
