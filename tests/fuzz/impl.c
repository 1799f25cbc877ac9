/* The implementation of attn.h for the fuzz harnesses, compiled once with their instrumentation
   and linked into each of them. */
#define ATTN_IMPLEMENTATION
#include "../../attn.h"
