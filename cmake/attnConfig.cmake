# find_package(attn): the header-only target attn::attn of an installed attn.h. Both `make
# install` and `cmake --install` put this file in <prefix>/share/cmake/attn and the header in
# <prefix>/include, so the paths are taken relative to this file: the installed tree can be
# moved to another prefix or machine. Link libm by name (never a build machine's path); the
# header still needs ATTN_IMPLEMENTATION in one source file, and OpenMP linked by the program
# to run on its threads.
get_filename_component(_attn_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET attn::attn)
    add_library(attn::attn INTERFACE IMPORTED)
    set_target_properties(attn::attn PROPERTIES
                          INTERFACE_INCLUDE_DIRECTORIES "${_attn_prefix}/include")
    if(NOT WIN32)
        set_property(TARGET attn::attn PROPERTY INTERFACE_LINK_LIBRARIES m)
    endif()
endif()
unset(_attn_prefix)
