/* Nothing but a name: a library called libtorch_npu.so, preloaded beside the shim so that it takes the process for a
 * torch_npu one (the file names of the loaded libraries decide, shim/capture/session.cpp) and writes PyTorch's dtype
 * spellings. */
int msprobe_test_torch_npu_name_stub(void) { return 0; }
