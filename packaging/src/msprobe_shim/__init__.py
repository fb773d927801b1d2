"""msprobe-shim: kernel-level accuracy dumps for Huawei Ascend NPU programs, by LD_PRELOAD.

    msprobe-shim --task tensor --dump-path ./dump -- python train.py
    LD_PRELOAD=$(msprobe-shim --print-preload) MSPROBE_DUMP_PATH=./dump python train.py
"""
from .launcher import INSPECT, LIBRARY  # noqa: F401 - the packaged files' paths

__all__ = ["LIBRARY", "INSPECT"]
