/* The implementation of attn.h for the fuzz harnesses, compiled once with their instrumentation
   and linked into each of them; with the tile kernels emulated where the CPU has no AMX. */
#define ATTN_IMPLEMENTATION
#define ATTN_TILES_EMULATE
#include "../../attn.h"
