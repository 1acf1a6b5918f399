# BLAKE3 (docs/commitments.md): the reference C implementation that Debian ships as source in
# librust-blake3-dev (/usr/share/cargo/registry/blake3-*/c/; scripts/bootstrap.sh installs it), built
# here as the static library `blake3`. x86-64 links the portable code and the SSE2, SSE4.1, AVX2 and
# AVX-512 assembly back ends, picked at run time from CPUID by blake3_dispatch.c; AArch64 links the
# NEON back end; any other target the portable code alone. Every back end gives the same digests.
enable_language(C)
# A C compiler of another family than the C++ one links its runtime into the programs: clang++'s
# sanitizer builds with gcc's C compiler get gcc's libasan next to clang's and abort at start.
if(NOT CMAKE_C_COMPILER_ID STREQUAL CMAKE_CXX_COMPILER_ID)
  message(FATAL_ERROR "the C compiler (${CMAKE_C_COMPILER}, ${CMAKE_C_COMPILER_ID}) is not of the C++ compiler's "
                      "family (${CMAKE_CXX_COMPILER}, ${CMAKE_CXX_COMPILER_ID}): set CMAKE_C_COMPILER to its "
                      "C compiler, e.g. -DCMAKE_C_COMPILER=clang with -DCMAKE_CXX_COMPILER=clang++")
endif()
file(GLOB TRIBUNAL_BLAKE3_HINTS LIST_DIRECTORIES true /usr/share/cargo/registry/blake3-*/c)
find_path(TRIBUNAL_BLAKE3_DIR blake3_dispatch.c HINTS ${TRIBUNAL_BLAKE3_HINTS} NO_DEFAULT_PATH
          NO_CMAKE_FIND_ROOT_PATH DOC "BLAKE3's C sources (Debian librust-blake3-dev)")
if(NOT TRIBUNAL_BLAKE3_DIR)
  message(FATAL_ERROR "BLAKE3's C sources were not found in /usr/share/cargo/registry/blake3-*/c/: "
                      "install Debian's librust-blake3-dev (scripts/bootstrap.sh) or set TRIBUNAL_BLAKE3_DIR")
endif()
set(_b3 ${TRIBUNAL_BLAKE3_DIR})
add_library(blake3 STATIC ${_b3}/blake3.c ${_b3}/blake3_dispatch.c ${_b3}/blake3_portable.c)
target_include_directories(blake3 SYSTEM PUBLIC ${_b3})
set_target_properties(blake3 PROPERTIES POSITION_INDEPENDENT_CODE ON C_STANDARD 99)
target_compile_options(blake3 PRIVATE -O3 -w)  # Debian's code as shipped: its warnings are not ours
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  enable_language(ASM)
  target_sources(blake3 PRIVATE ${_b3}/blake3_sse2_x86-64_unix.S ${_b3}/blake3_sse41_x86-64_unix.S
                                ${_b3}/blake3_avx2_x86-64_unix.S ${_b3}/blake3_avx512_x86-64_unix.S)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  target_sources(blake3 PRIVATE ${_b3}/blake3_neon.c)
  target_compile_definitions(blake3 PRIVATE BLAKE3_USE_NEON=1 BLAKE3_NO_SSE2 BLAKE3_NO_SSE41 BLAKE3_NO_AVX2
                                            BLAKE3_NO_AVX512)
else()
  target_compile_definitions(blake3 PRIVATE BLAKE3_USE_NEON=0 BLAKE3_NO_SSE2 BLAKE3_NO_SSE41 BLAKE3_NO_AVX2
                                            BLAKE3_NO_AVX512)
endif()
message(STATUS "blake3: ${TRIBUNAL_BLAKE3_DIR} (${CMAKE_SYSTEM_PROCESSOR})")
