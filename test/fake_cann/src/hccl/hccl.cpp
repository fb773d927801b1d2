// libhccl.so — in progress.
