# The shim's configuration (shim/config/config.h): environment variables, msprobe config.json, validation messages; the
# kernel filters and the name-regex engine (shim/config/kernel_filter.h); the log helper (shim/base/log.h).
msprobe_gtest(shim_config SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_config.cpp LINK msprobe_shim_config TIMEOUT 120)
msprobe_gtest(shim_config_kernel_filter SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_kernel_filter.cpp
              LINK msprobe_shim_config TIMEOUT 120)
