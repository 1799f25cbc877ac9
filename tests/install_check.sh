#!/bin/sh
# install_check.sh B - the packaging as a user meets it: after `make install` and after `cmake
# --install`, the header, attn.pc and the CMake package are all there (no path of this machine
# in them), and a program builds with pkg-config's flags and with find_package(attn); an
# installed tree moved to another prefix still serves both; add_subdirectory() too. Each
# consumer includes <attn.h> and needs no library of ours.
# Prints PASS/FAIL per check, SKIP where pkg-config or cmake is missing, and
# "N passed, N failed, N skipped".
B=$(mkdir -p "$1/install" && cd "$1/install" && pwd); root=$(cd "$(dirname "$0")/.." && pwd)
p=0; f=0; s=0
check() {  # name, command...: 0 when it passed
    name=$1; shift
    if out=$("$@" 2>&1); then p=$((p + 1)); echo "PASS $name"
    else f=$((f + 1)); echo "FAIL $name"; echo "$out" | tail -20; return 1; fi
}
rm -rf "${B:?}"/*
version=$(sed -n 's/^#define ATTN_VERSION_STRING "\(.*\)"/\1/p' "$root/attn.h")
cat > "$B/consumer.c" <<'END'
#include <attn.h>
#include <stdio.h>
int main(void) {
    attn_params p = {0};
    p.num_heads = 1;
    printf("attn.h %s, %d head\n", ATTN_VERSION_STRING, p.num_heads);
    return ATTN_VERSION_NUMBER > 0 ? 0 : 1;
}
END

# The two ways to install, each into its own prefix.
make_install() { make -s -C "$root" install PREFIX="$1"; }
cmake_install() {
    rm -rf "$B/attn-build"
    cmake -S "$root" -B "$B/attn-build" -DATTN_BUILD_EXAMPLES=OFF -DCMAKE_INSTALL_PREFIX="$1" \
        > /dev/null && cmake --install "$B/attn-build" > /dev/null
}
# The two ways to consume an installed prefix.
pc_consumer() {  # prefix, tag: the consumer built with pkg-config's flags
    PKG_CONFIG_PATH=$1/share/pkgconfig pkg-config --exact-version="$version" attn || return 1
    # shellcheck disable=SC2046
    cc -std=c99 -Wall -Werror $(PKG_CONFIG_PATH=$1/share/pkgconfig pkg-config --cflags attn) \
        "$B/consumer.c" -o "$B/pc_$2" $(PKG_CONFIG_PATH=$1/share/pkgconfig pkg-config --libs attn) \
        && "$B/pc_$2"
}
fp_consumer() {  # prefix, tag: find_package(attn) from a consumer's CMake project
    rm -rf "$B/fp_$2" && mkdir -p "$B/fp_$2"
    cat > "$B/fp_$2/CMakeLists.txt" <<END
cmake_minimum_required(VERSION 3.14)
project(consumer C)
find_package(attn $version CONFIG REQUIRED)
add_executable(consumer ../consumer.c)
target_link_libraries(consumer PRIVATE attn::attn)
END
    cmake -S "$B/fp_$2" -B "$B/fp_$2/build" -DCMAKE_PREFIX_PATH="$1" > /dev/null &&
        cmake --build "$B/fp_$2/build" > /dev/null && "$B/fp_$2/build/consumer"
}
whole() {  # prefix: header, attn.pc and the package files, none naming a path of this machine
    for f in include/attn.h share/pkgconfig/attn.pc share/cmake/attn/attnConfig.cmake \
             share/cmake/attn/attnConfigVersion.cmake; do
        [ -f "$1/$f" ] || { echo "missing $f"; return 1; }
    done
    if grep -rl -e "$1" -e "$B" -e "libm\." "$1/share"; then echo "a path in the files above"; return 1; fi
}
moved() {  # installer, consumer: install, move the tree to another prefix, consume it there
    rm -rf "$B/p_a" "$B/p_b" && "$1" "$B/p_a" && mv "$B/p_a" "$B/p_b" && "$2" "$B/p_b" moved_$1_$2
}
cmake_subdirectory() {  # the project as a subdirectory of a consumer's
    mkdir -p "$B/sub"
    cat > "$B/sub/CMakeLists.txt" <<END
cmake_minimum_required(VERSION 3.14)
project(consumer C)
add_subdirectory("$root" attn)
add_executable(consumer ../consumer.c)
target_link_libraries(consumer PRIVATE attn::attn)
END
    cmake -S "$B/sub" -B "$B/sub/build" > /dev/null && cmake --build "$B/sub/build" > /dev/null &&
        "$B/sub/build/consumer"
}

have_pc=$(command -v pkg-config); have_cmake=$(command -v cmake)
[ -n "$have_pc" ] || { s=$((s + 4)); echo "SKIP the pkg-config consumers: no pkg-config"; }
[ -n "$have_cmake" ] || { s=$((s + 9)); echo "SKIP cmake_install, the find_package consumers and add_subdirectory: no cmake"; }
for inst in make_install cmake_install; do
    [ "$inst" = make_install ] || [ -n "$have_cmake" ] || continue
    rm -rf "$B/pre_$inst"
    check "$inst" "$inst" "$B/pre_$inst" || continue
    check "${inst}_files" whole "$B/pre_$inst"
    [ -z "$have_pc" ] || check "${inst}_then_pkg_config" pc_consumer "$B/pre_$inst" "$inst"
    [ -z "$have_cmake" ] || check "${inst}_then_find_package" fp_consumer "$B/pre_$inst" "$inst"
    [ -z "$have_pc" ] || check "${inst}_moved_then_pkg_config" moved "$inst" pc_consumer
    [ -z "$have_cmake" ] || check "${inst}_moved_then_find_package" moved "$inst" fp_consumer
done
[ -z "$have_cmake" ] || check cmake_add_subdirectory cmake_subdirectory
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
