#!/bin/sh
# install_check.sh B - the packaging as a user meets it: `make install` then a program built
# with pkg-config's flags; CMake's find_package(attn) after `cmake --install`, and
# add_subdirectory(). Each consumer includes <attn.h> and needs no library of ours.
# Prints PASS/FAIL per check, SKIP where pkg-config or cmake is missing, and
# "N passed, N failed, N skipped".
B=$(mkdir -p "$1/install" && cd "$1/install" && pwd); root=$(cd "$(dirname "$0")/.." && pwd)
p=0; f=0; s=0
check() {  # name, command...
    name=$1; shift
    if out=$("$@" 2>&1); then p=$((p + 1)); echo "PASS $name"
    else f=$((f + 1)); echo "FAIL $name"; echo "$out" | tail -20; fi
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

pc_build() {  # make install into a prefix, then build the consumer with pkg-config's flags
    make -s -C "$root" install PREFIX="$B/prefix" || return 1
    PKG_CONFIG_PATH=$B/prefix/share/pkgconfig; export PKG_CONFIG_PATH
    pkg-config --exact-version="$version" attn || return 1
    # shellcheck disable=SC2046
    cc -std=c99 -Wall -Werror $(pkg-config --cflags attn) "$B/consumer.c" -o "$B/pc_consumer" \
        $(pkg-config --libs attn) && "$B/pc_consumer"
}
cmake_find_package() {  # cmake --install the project, then find_package(attn) from a consumer
    mkdir -p "$B/fp"
    cat > "$B/fp/CMakeLists.txt" <<END
cmake_minimum_required(VERSION 3.14)
project(consumer C)
find_package(attn $version CONFIG REQUIRED)
add_executable(consumer ../consumer.c)
target_link_libraries(consumer PRIVATE attn::attn)
END
    cmake -S "$root" -B "$B/attn-build" -DATTN_BUILD_EXAMPLES=OFF \
        -DCMAKE_INSTALL_PREFIX="$B/cmake-prefix" > /dev/null &&
        cmake --install "$B/attn-build" > /dev/null &&
        cmake -S "$B/fp" -B "$B/fp/build" -DCMAKE_PREFIX_PATH="$B/cmake-prefix" > /dev/null &&
        cmake --build "$B/fp/build" > /dev/null && "$B/fp/build/consumer"
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

if command -v pkg-config > /dev/null 2>&1; then check make_install_and_pkg_config pc_build
else s=$((s + 1)); echo "SKIP make_install_and_pkg_config: no pkg-config"; fi
if command -v cmake > /dev/null 2>&1; then
    check cmake_install_and_find_package cmake_find_package
    check cmake_add_subdirectory cmake_subdirectory
else
    s=$((s + 2)); echo "SKIP cmake_install_and_find_package, cmake_add_subdirectory: no cmake"
fi
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
