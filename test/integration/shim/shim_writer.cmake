# The collector's writer under the shim (issue 6): lz4 files checked with Debian's lz4 tool and msprobe-inspect,
# backpressure through a tiny MSPROBE_BUFFER_MB with nothing lost, pooled pinned buffers, launch order.
msprobe_pytest(test_shim_writer.py TIMEOUT 600)
