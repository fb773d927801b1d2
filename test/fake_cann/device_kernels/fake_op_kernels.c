/* The device binary of the stand-in's op libraries (see README.md): libnnopbase (aclnn phase 2) and
 * libascendcl (aclop) register it with rtRegisterAllKernel and launch every op with
 * rtKernelLaunchWithHandleV2 (tiling key 1), as real op libraries launch their TBE / Ascend C kernels.
 * The one implementation, op_task, runs the computation the op library prepared on the host: its tiling
 * data names it. */

#define FAKE_KERNEL(sym, desc) \
  __attribute__((section(".fake_kernel"), used, aligned(8))) const char sym[] = "fake-kernel v1 " desc

FAKE_KERNEL(fake_op_task_1, "impl=op_task");
