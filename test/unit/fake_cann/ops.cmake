# The aclnn ops of libopapi, checked against independent numpy computations (ctypes, dlopen/dlsym).
msprobe_pytest(test_aclnn_ops.py TIMEOUT 300)
# The transformer ops of issue 41 (attention, RoPE, SwiGlu, norms, cross entropy, the examples' common ops).
msprobe_pytest(test_aclnn_transformer_ops.py TIMEOUT 300)
# aclnnCast and the 8- and 4-bit float types (against an independent numpy encoding): as Ascend910B1 (refused) and as
# Ascend950PR_9599 (cast and rounded as CANN's arch35 policies).
msprobe_pytest(test_cast_minifloat.py TIMEOUT 300)
add_test(NAME unit.fake_cann.test_cast_minifloat_950
         COMMAND ${TEST_PYTHON} -m pytest -q -rs -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/test_cast_minifloat.py)
set_tests_properties(unit.fake_cann.test_cast_minifloat_950 PROPERTIES
                     ENVIRONMENT "${MSPROBE_TEST_ENV};FAKE_CANN_SOC=Ascend950PR_9599" TIMEOUT 300)
