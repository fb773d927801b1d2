"""Only here to tag the wheel: py3-none-manylinux_2_28_<arch> (or linux_<arch>, $MSPROBE_WHEEL_TAG), <arch> read from the ELF header of the staged
libmsprobe_shim.so (so an aarch64 library can never be shipped in an x86_64 wheel). Everything else is in
pyproject.toml."""
import os
import struct

from setuptools import Distribution, setup
from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(HERE, "src", "msprobe_shim", "lib", "libmsprobe_shim.so")
E_MACHINE = {62: "x86_64", 183: "aarch64"}
# manylinux_2_28 (what scripts/build_wheel.sh checked with readelf before building) or linux (host only).
TAG = os.environ.get("MSPROBE_WHEEL_TAG", "manylinux_2_28")


def elf_arch(path):
    with open(path, "rb") as f:
        head = f.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        raise SystemExit(f"{path}: not a 64-bit little-endian ELF file")
    machine = struct.unpack_from("<H", head, 18)[0]
    if machine not in E_MACHINE:
        raise SystemExit(f"{path}: ELF machine {machine} is neither x86_64 (62) nor aarch64 (183)")
    return E_MACHINE[machine]


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True  # binaries inside: installed into platlib, the wheel is not "pure"


class BdistWheel(bdist_wheel):
    def get_tag(self):
        if TAG not in ("manylinux_2_28", "linux"):
            raise SystemExit(f"MSPROBE_WHEEL_TAG={TAG}: accepted: manylinux_2_28, linux")
        return "py3", "none", f"{TAG}_{elf_arch(LIB)}"


setup(distclass=BinaryDistribution, cmdclass={"bdist_wheel": BdistWheel})
