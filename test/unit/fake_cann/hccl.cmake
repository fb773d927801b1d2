# libhccl across processes: every test forks one child process per rank (see test_hccl.cpp).
msprobe_gtest(fake_cann_hccl SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_hccl.cpp LINK hccl ascendcl runtime TIMEOUT 120)
# The same from Python/ctypes: two interpreter processes hand the root info over through a file.
msprobe_pytest(test_hccl_ctypes.py TIMEOUT 120)
# Ranks as threads of one process (one device per thread), as CANN's HCCL samples run: Reduce, Scatter,
# BatchSendRecv, HcclCommInitAll, the 8-bit floating types.
msprobe_gtest(fake_cann_hccl_threads SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_hccl_threads.cpp LINK hccl ascendcl runtime
              TIMEOUT 120)
