# Cross-compiling for 64-bit Arm Linux with Debian's cross compiler (g++-aarch64-linux-gnu) against
# the multiarch :arm64 library packages; scripts/bootstrap.sh --cross aarch64 installs all of them.
# Used by the `aarch64` preset (CMakePresets.json). Built programs run on an arm64 machine, or here
# under qemu-user: CMake and CTest prefix them with CMAKE_CROSSCOMPILING_EMULATOR (docs/running.md).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# The multiarch directories (/usr/lib/aarch64-linux-gnu, its cmake/ and pkgconfig/) hold the :arm64
# packages; the architecture-independent header-only packages (nlohmann-json, CLI11, doctest) are
# found where the native build finds them.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
# qemu-user runs the arm64 binaries (tests, the trajectory check). They load the multiarch arm64 C
# library (libc6:arm64, /lib/ld-linux-aarch64.so.1), whose loader matches its libc.so.6 and the :arm64
# libraries. Not `-L /usr/aarch64-linux-gnu` (QEMU_LD_PREFIX): that takes the cross toolchain's loader
# but still finds the multiarch libc.so.6, a mismatched pair that hangs in the first pthread_create.
# A cache entry, so scripts/check_roots.sh reads it from the build directory.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 CACHE STRING "Runs the arm64 programs on this machine")
