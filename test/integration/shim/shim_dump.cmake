# libmsprobe_shim.so's dumps of examples/train.py: complete (one entry per launched kernel), correct
# (numpy recomputation of every op, statistics), host unchanged; 2-rank half and modes/filters apart so
# that ctest -j runs them side by side.
msprobe_pytest(test_shim_dump.py TIMEOUT 600)
msprobe_pytest(test_shim_dump_ranks.py TIMEOUT 600)
msprobe_pytest(test_shim_dump_modes.py TIMEOUT 600)
# Every leaf of real dumps (train.py, acl_app, aclop list attributes; every task) has a scalar value, as msprobe's
# compare needs (issue 17); compare and replay read the sequence form and the old list-value form alike.
msprobe_pytest(test_dump_leaves.py TIMEOUT 900)
# The two rules every msprobe applies to an entry (direction token, nothing truthy but strings, lists, bools and
# objects at its top level; issue 27), read by a checker of our own on real dumps of every task and host.
msprobe_pytest(test_msprobe_rules.py TIMEOUT 600)
# The capture on both of the stand-in's CANN library layouts (8.x, 9.x): the same dumps (issue 40, item 2).
msprobe_pytest(test_shim_layouts.py TIMEOUT 600)
