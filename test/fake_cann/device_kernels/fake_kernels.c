/* The stand-in's device binary (see README.md). Compiled with the host compiler into an ELF object;
 * each kernel is a data symbol in section .fake_kernel whose bytes name the runtime's built-in CPU
 * implementation. Several symbols may share one implementation. */

#define FAKE_KERNEL(sym, desc) \
  __attribute__((section(".fake_kernel"), used, aligned(8))) const char sym[] = "fake-kernel v1 " desc

/* Launched by stub (rtFunctionRegister + rtKernelLaunch / rtKernelLaunchWithFlag). */
FAKE_KERNEL(fake_vector_add, "impl=vector_add dtype=float32");
FAKE_KERNEL(fake_vector_add_fp16, "impl=vector_add dtype=float16");
FAKE_KERNEL(fake_scale, "impl=scale dtype=float32");
FAKE_KERNEL(fake_relu, "impl=relu dtype=float32");

/* Launched by handle (rtRegisterAllKernel + rtKernelLaunchWithHandle): Ascend C names the kernel of
 * tiling key K of a kernel family `{kernel}_{K}`. */
FAKE_KERNEL(fake_elementwise_1, "impl=vector_add dtype=float32");
FAKE_KERNEL(fake_elementwise_2, "impl=scale dtype=float32");
FAKE_KERNEL(fake_elementwise_3, "impl=relu dtype=float32");
FAKE_KERNEL(fake_elementwise_4, "impl=vector_add dtype=float16");
