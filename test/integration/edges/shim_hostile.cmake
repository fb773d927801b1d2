# Hostile inputs and security rules (issue 8): huge, deep and odd config.json files, full disk, planted symlinks,
# hostile kernel names, API misuse passed through, permissions, no shell-outs, literal format strings.
msprobe_pytest(test_shim_hostile.py TIMEOUT 900)
