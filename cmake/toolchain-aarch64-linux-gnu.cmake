# Cross build for aarch64 (Kunpeng hosts) with Debian's g++-aarch64-linux-gnu and arm64 multiarch packages
# (libffi-dev:arm64, libelf-dev:arm64, ...: scripts/test_aarch64.sh installs them). Tests run under qemu-user:
#   cmake -S . -B build-aarch64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Dependencies are Debian multiarch packages: headers in /usr/include (shared with the host, arch-specific
# ones under /usr/include/aarch64-linux-gnu), libraries and CMake/pkg-config files in /usr/lib/aarch64-linux-gnu.
# Programs (python3 for code generation, readelf) come from the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config must see only the arm64 .pc files, never the host's (same names, wrong libraries).
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")

# ctest runs target executables through qemu-user. The arm64 loader and libc are installed through multiarch
# (libc6:arm64), so the guest finds its libraries in /lib/aarch64-linux-gnu without -L. qemu-user-static (what
# scripts/test_aarch64.sh installs) first: static, so an LD_PRELOAD meant for the guest never reaches qemu itself;
# qemu-user's dynamic qemu-aarch64 otherwise.
find_program(MSPROBE_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(MSPROBE_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${MSPROBE_QEMU_AARCH64})
endif()
