/*
 * A CPU-only stand-in for the CUDA driver library (libcuda.so.1), used by eagle3lab's cpu profile.
 *
 * sgl_kernel's extension modules link against libcuda.so.1; without a GPU driver, `import sgl_kernel` (which
 * sglang 0.5.9 does unguarded) fails. This library lets them load and answers every driver call with
 * CUDA_ERROR_STUB_LIBRARY, the driver's own code for "this is a stub", so nothing can pretend to run on a GPU.
 *
 * The symbol list is not written by hand: eagle3lab.cpu_harness.libcuda_stub reads the undefined cu* symbols of
 * the installed sgl_kernel with `nm -D --undefined-only`, writes one STUB(name) line per symbol into
 * stub_symbols.h, and compiles this file with `cc -shared -fPIC`.
 */

#define CUDA_ERROR_STUB_LIBRARY 34

/* Arguments are ignored; on the x86-64 and aarch64 C ABIs extra caller arguments are harmless. */
#define STUB(name) int name(void) { return CUDA_ERROR_STUB_LIBRARY; }

#include "stub_symbols.h"
