# Which public header declares what (hccl.h brings acl.h; aclmdlRI* and the dump switches in acl_rt.h; header names).
msprobe_gtest(fake_cann_header_layout
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_header_layout_hccl.cpp ${CMAKE_CURRENT_LIST_DIR}/test_header_layout_rt.cpp
  LINK ascendcl hccl runtime)
