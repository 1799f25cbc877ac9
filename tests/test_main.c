/* The one test runner: every test file is included into this translation unit so private
   attn__ functions can be tested too. Usage: test_main [--list] [-v] [name-filter ...] */
#define _DEFAULT_SOURCE  /* mmap (test_guard.c) and threads (test_determinism.c) under -std=c99 */
#define ATTN_IMPLEMENTATION
#define ATTN_TILES_EMULATE  /* ATTN_ISA_AMX everywhere: emulated tiles where the CPU has none */
#ifdef ATTN_TEST_DECODE_TILES_ALL
#define ATTN_DECODE_TILES   /* decode's logits on them for every query dtype from G = 4 */
#endif
/* every call on the threads it is given, however small: the suite's small shapes test the
   parallel paths (test_core.c tests the serial threshold itself) */
#define ATTN_SERIAL_WORK 0
#include "../attn.h"
#define ATTN_TEST_IMPLEMENTATION
#include "attn_test.h"
#include "ref.h"
#include "test_util.h"

#include "test_ref.c"
#include "test_core.c"
#include "test_sdpa.c"
#include "test_kv.c"
#include "test_int_kv.c"
#include "test_decode.c"
#include "test_paged_prefill.c"
#include "test_forward.c"
#include "test_serve.c"
#include "test_misuse.c"
#include "test_prefix.c"
#include "test_onednn.c"
#include "test_guard.c"
#include "test_determinism.c"
#include "test_shared.c"
#include "test_fuzz_found.c"

static const attn_test_entry all_tests[] = {
    TEST_REF_LIST,
    TEST_CORE_LIST,
    TEST_SDPA_LIST,
    TEST_KV_LIST,
    TEST_INT_KV_LIST,
    TEST_DECODE_LIST,
    TEST_PAGED_PREFILL_LIST,
    TEST_FORWARD_LIST,
    TEST_SERVE_LIST,
    TEST_MISUSE_LIST,
    TEST_PREFIX_LIST,
    TEST_ONEDNN_LIST,
    TEST_GUARD_LIST,
    TEST_DETERMINISM_LIST,
    TEST_SHARED_LIST,
    TEST_FUZZ_FOUND_LIST,
    {NULL, NULL}};

int main(int argc, char **argv) {
    printf("%s\n%s\n", attn_build_info(), attn_cpu_features());
    /* which tiles ATTN_ISA_AMX ran on (the tile kernels of bf16 prefill) */
    printf("tile backend: %s\n", !attn_isa_supported(ATTN_ISA_AMX) ? "none (ATTN_ISA_AMX not run)"
           : strstr(attn_cpu_features(), "amx=yes") ? "amx (the CPU's tiles)"
           : "emulated (this CPU has no usable AMX tiles)");
    return attn_test_run(all_tests, argc, argv);
}
