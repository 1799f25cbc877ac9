/* attn_test.h - the small stb-style test harness of attn.h - public domain or MIT, see attn.h

   USAGE
     In exactly one translation unit (tests/test_main.c):
         #define ATTN_TEST_IMPLEMENTATION
         #include "attn_test.h"

         TEST(adds_up) { CHECK_EQ_INT(1 + 1, 2); }

         static const attn_test_entry tests[] = { ATTN_TEST_ENTRY(adds_up), ATTN_TEST_END };
         int main(int argc, char **argv) { return attn_test_run(tests, argc, argv); }

     A TEST that is not registered is an unused static function, which -Wall -Werror reports.

   CHECKS (the short names are defined unless ATTN_TEST_NO_SHORT_NAMES; the long ones always are,
   as ATTN_TEST_CHECK, ATTN_TEST_REQUIRE, ...). Every CHECK is an expression: 1 = passed.
     CHECK(cond)                              record a failure and carry on
     CHECK_MSG(cond, fmt, ...)                the same, with a printf-style explanation
     REQUIRE(cond), REQUIRE_MSG(cond, fmt, ...)  record a failure and return from the test
     SKIP(reason)                             mark the test skipped, say why, and return
     CHECK_EQ_INT(a, b)                       both printed as long long
     CHECK_NEAR(a, b, tol)                    |a-b| <= tol; NaN fails; equal infinities pass
     CHECK_ALLCLOSE(got, want, n, atol, rtol)    float got[n] vs float want[n]
     CHECK_ALLCLOSE_D(got, want, n, atol, rtol)  float got[n] vs double want[n]
         element i passes when |g-w| <= atol + rtol*|w|, or g and w are both NaN, or are the
         same infinity; the report gives the worst element (%.9g) and how many failed
     CHECK_BITEQ(a, b, nbytes)                memcmp; reports the first differing byte
   REQUIRE and SKIP contain `return`, so use them only in the test function itself.
   Each check counts, passed or failed. A test that ends with no failure, no SKIP and no check
   made is reported "SKIP name: no checks ran" and counted as skipped, never as passed: a test
   that cannot run somewhere (a CPU feature, a build flag) calls SKIP with the reason instead.

   RUNNER   attn_test_run(list, argc, argv) runs a NULL-terminated list in order.
     positional arguments   substring filters (a test runs when any filter is in its name)
     --list                 print the names of the selected tests and return 0
     -v                     print each passing test's time in ms
   Output (stdout, no colour): "seed N", then per test "PASS name", "SKIP name: reason" or
   "FAIL name" followed by its failure lines (printed as they happen; at most
   ATTN_TEST_MAX_FAILURE_LINES per test), and last exactly "%d passed, %d failed, %d skipped".
   Returns 0 iff nothing failed and at least one test passed.

   RANDOM DATA   attn_test_seed() is fixed (ATTN_TEST_SEED, default 20261122) and printed, so a
   failure reproduces. attn_test_rand_* is splitmix64: the same on every platform.
*/
#ifndef ATTN_TEST_H_INCLUDED
#define ATTN_TEST_H_INCLUDED

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_test_entry {
    const char *name;
    void (*fn)(void);
} attn_test_entry;

#define ATTN_TEST(name)       static void name(void)
#define ATTN_TEST_ENTRY(name) { #name, name }
#define ATTN_TEST_END         { 0, 0 }

int attn_test_run(const attn_test_entry *list, int argc, char **argv);
int attn_test_current_failures(void);  /* failures so far in the running test */

uint64_t attn_test_seed(void);
uint64_t attn_test_rand_u64(uint64_t *state);
float attn_test_rand_uniform(uint64_t *state, float lo, float hi);   /* in [lo, hi] */
int attn_test_rand_int(uint64_t *state, int lo, int hi_inclusive);

#if defined(__GNUC__) || defined(__clang__)
#define ATTN_TEST__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define ATTN_TEST__PRINTF(f, a)
#endif

/* Internal: each returns 1 when the check passed. */
int attn_test__check(int ok, const char *file, int line, const char *expr);
int attn_test__checkf(int ok, const char *file, int line, const char *expr, const char *fmt, ...)
    ATTN_TEST__PRINTF(5, 6);
int attn_test__eq_int(long long a, long long b, const char *file, int line, const char *expr);
int attn_test__near(double a, double b, double tol, const char *file, int line, const char *expr);
int attn_test__allclose(const float *got, const float *want_f, const double *want_d, long n,
                        double atol, double rtol, const char *file, int line, const char *expr);
int attn_test__biteq(const void *a, const void *b, long nbytes, const char *file, int line,
                     const char *expr);
void attn_test__skip(const char *reason);

#ifdef __cplusplus
}
#endif

#define ATTN_TEST_CHECK(cond) attn_test__check(!!(cond), __FILE__, __LINE__, "CHECK(" #cond ")")
#define ATTN_TEST_CHECK_MSG(cond, ...) \
    attn_test__checkf(!!(cond), __FILE__, __LINE__, "CHECK(" #cond ")", __VA_ARGS__)
#define ATTN_TEST_REQUIRE(cond) do { \
        if (!attn_test__check(!!(cond), __FILE__, __LINE__, "REQUIRE(" #cond ")")) return; \
    } while (0)
#define ATTN_TEST_REQUIRE_MSG(cond, ...) do { \
        if (!attn_test__checkf(!!(cond), __FILE__, __LINE__, "REQUIRE(" #cond ")", \
                               __VA_ARGS__)) return; \
    } while (0)
#define ATTN_TEST_SKIP(reason) do { attn_test__skip(reason); return; } while (0)
#define ATTN_TEST_CHECK_EQ_INT(a, b) attn_test__eq_int((long long)(a), (long long)(b), \
    __FILE__, __LINE__, "CHECK_EQ_INT(" #a ", " #b ")")
#define ATTN_TEST_CHECK_NEAR(a, b, tol) attn_test__near((double)(a), (double)(b), (double)(tol), \
    __FILE__, __LINE__, "CHECK_NEAR(" #a ", " #b ", " #tol ")")
#define ATTN_TEST_CHECK_ALLCLOSE(got, want, n, atol, rtol) \
    attn_test__allclose((got), (want), 0, (long)(n), (double)(atol), (double)(rtol), \
        __FILE__, __LINE__, "CHECK_ALLCLOSE(" #got ", " #want ", " #n ", " #atol ", " #rtol ")")
#define ATTN_TEST_CHECK_ALLCLOSE_D(got, want, n, atol, rtol) \
    attn_test__allclose((got), 0, (want), (long)(n), (double)(atol), (double)(rtol), \
        __FILE__, __LINE__, "CHECK_ALLCLOSE_D(" #got ", " #want ", " #n ", " #atol ", " #rtol ")")
#define ATTN_TEST_CHECK_BITEQ(a, b, nbytes) attn_test__biteq((a), (b), (long)(nbytes), \
    __FILE__, __LINE__, "CHECK_BITEQ(" #a ", " #b ", " #nbytes ")")

#ifndef ATTN_TEST_NO_SHORT_NAMES
#define TEST              ATTN_TEST
#define CHECK             ATTN_TEST_CHECK
#define CHECK_MSG         ATTN_TEST_CHECK_MSG
#define REQUIRE           ATTN_TEST_REQUIRE
#define REQUIRE_MSG       ATTN_TEST_REQUIRE_MSG
#define SKIP              ATTN_TEST_SKIP
#define CHECK_EQ_INT      ATTN_TEST_CHECK_EQ_INT
#define CHECK_NEAR        ATTN_TEST_CHECK_NEAR
#define CHECK_ALLCLOSE    ATTN_TEST_CHECK_ALLCLOSE
#define CHECK_ALLCLOSE_D  ATTN_TEST_CHECK_ALLCLOSE_D
#define CHECK_BITEQ       ATTN_TEST_CHECK_BITEQ
#endif

#endif /* ATTN_TEST_H_INCLUDED */

#ifdef ATTN_TEST_IMPLEMENTATION
#ifndef ATTN_TEST_IMPLEMENTATION_INCLUDED
#define ATTN_TEST_IMPLEMENTATION_INCLUDED

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#ifndef ATTN_TEST_SEED
#define ATTN_TEST_SEED 20261122u
#endif
#ifndef ATTN_TEST_MAX_FAILURE_LINES
#define ATTN_TEST_MAX_FAILURE_LINES 20
#endif

static struct {
    const char *name;  /* the running test, NULL outside one */
    int failures;      /* failed checks in it */
    long checks;       /* checks made in it, passed or failed */
    int skipped;
} attn_test__cur;

static const char *attn_test__name(void) {
    return attn_test__cur.name ? attn_test__cur.name : "(outside a test)";
}

/* Counts a failure; prints "FAIL name" at the first one and "  file:line: " before each of the
   first ATTN_TEST_MAX_FAILURE_LINES. Returns whether the caller should print its details. */
static int attn_test__fail_begin(const char *file, int line) {
    if (attn_test__cur.failures++ == 0) printf("FAIL %s\n", attn_test__name());
    if (attn_test__cur.failures > ATTN_TEST_MAX_FAILURE_LINES) return 0;
    printf("  %s:%d: ", file, line);
    return 1;
}

static void attn_test__fail_end(void) {
    printf("\n");
    fflush(stdout);
}

int attn_test__check(int ok, const char *file, int line, const char *expr) {
    attn_test__cur.checks++;
    if (!ok && attn_test__fail_begin(file, line)) {
        printf("%s", expr);
        attn_test__fail_end();
    }
    return ok;
}

int attn_test__checkf(int ok, const char *file, int line, const char *expr, const char *fmt, ...) {
    attn_test__cur.checks++;
    if (!ok && attn_test__fail_begin(file, line)) {
        va_list ap;
        printf("%s: ", expr);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        attn_test__fail_end();
    }
    return ok;
}

int attn_test__eq_int(long long a, long long b, const char *file, int line, const char *expr) {
    int ok = a == b;
    attn_test__cur.checks++;
    if (!ok && attn_test__fail_begin(file, line)) {
        printf("%s: %lld != %lld", expr, a, b);
        attn_test__fail_end();
    }
    return ok;
}

/* Is g close to w? NaN matches only NaN, an infinity only the same infinity. */
static int attn_test__close(double g, double w, double tol) {
    if (isnan(g) || isnan(w)) return isnan(g) && isnan(w);
    if (isinf(g) || isinf(w)) return g == w;
    return fabs(g - w) <= tol;
}

int attn_test__near(double a, double b, double tol, const char *file, int line, const char *expr) {
    int ok = !isnan(a) && !isnan(b) && attn_test__close(a, b, tol);
    attn_test__cur.checks++;
    if (!ok && attn_test__fail_begin(file, line)) {
        printf("%s: %.9g vs %.9g, |diff| %.3g > tol %.3g", expr, a, b, fabs(a - b), tol);
        attn_test__fail_end();
    }
    return ok;
}

int attn_test__allclose(const float *got, const float *want_f, const double *want_d, long n,
                        double atol, double rtol, const char *file, int line, const char *expr) {
    long i, worst = -1, nfail = 0;
    double worst_excess = 0;
    attn_test__cur.checks++;
    for (i = 0; i < n; i++) {
        double g = got[i], w = want_f ? (double)want_f[i] : want_d[i];
        double tol = atol + rtol * fabs(w);
        if (!attn_test__close(g, w, tol)) {
            /* how far past the tolerance; a NaN or infinity mismatch is the worst possible */
            double excess = (isfinite(g) && isfinite(w)) ? fabs(g - w) - tol : HUGE_VAL;
            if (worst < 0 || excess > worst_excess) { worst = i; worst_excess = excess; }
            nfail++;
        }
    }
    if (nfail && attn_test__fail_begin(file, line)) {
        double w = want_f ? (double)want_f[worst] : want_d[worst];
        double g = got[worst];
        printf("%s: worst [%ld] got %.9g want %.9g (|diff| %.3g, tol %.3g); %ld of %ld fail",
               expr, worst, g, w, fabs(g - w), atol + rtol * fabs(w), nfail, n);
        attn_test__fail_end();
    }
    return nfail == 0;
}

int attn_test__biteq(const void *a, const void *b, long nbytes, const char *file, int line,
                     const char *expr) {
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
    long i;
    attn_test__cur.checks++;
    if (nbytes <= 0 || memcmp(a, b, (size_t)nbytes) == 0) return 1;
    for (i = 0; x[i] == y[i]; i++) {}
    if (attn_test__fail_begin(file, line)) {
        printf("%s: first difference at byte %ld (0x%02x vs 0x%02x)", expr, i, x[i], y[i]);
        attn_test__fail_end();
    }
    return 0;
}

void attn_test__skip(const char *reason) {
    if (attn_test__cur.failures) {  /* a test that already failed stays failed */
        if (attn_test__cur.failures <= ATTN_TEST_MAX_FAILURE_LINES)
            printf("  then SKIP: %s\n", reason);
        return;
    }
    attn_test__cur.skipped = 1;
    printf("SKIP %s: %s\n", attn_test__name(), reason);
}

int attn_test_current_failures(void) { return attn_test__cur.failures; }

uint64_t attn_test_seed(void) { return (uint64_t)ATTN_TEST_SEED; }

/* splitmix64 (Steele, Lea, Flood 2014): add the golden-ratio increment, then mix. */
uint64_t attn_test_rand_u64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float attn_test_rand_uniform(uint64_t *state, float lo, float hi) {
    double u = (double)(attn_test_rand_u64(state) >> 11) * (1.0 / 9007199254740992.0); /* [0,1) */
    return (float)((double)lo + ((double)hi - (double)lo) * u);
}

int attn_test_rand_int(uint64_t *state, int lo, int hi_inclusive) {
    uint64_t range;
    if (hi_inclusive <= lo) return lo;
    range = (uint64_t)((long long)hi_inclusive - (long long)lo) + 1u;
    return (int)((long long)lo + (long long)(attn_test_rand_u64(state) % range));
}

/* Milliseconds from a monotonic clock when <time.h> offers one (POSIX), else CPU time. */
static double attn_test__now_ms(void) {
#if defined(CLOCK_MONOTONIC)
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
#else
    return (double)clock() * 1e3 / (double)CLOCKS_PER_SEC;
#endif
}

static int attn_test__selected(const char *name, int argc, char **argv) {
    int i, have_filter = 0;
    for (i = 1; i < argc; i++) {
        if (argv[i][0] == '-') continue;
        have_filter = 1;
        if (strstr(name, argv[i])) return 1;
    }
    return !have_filter;
}

int attn_test_run(const attn_test_entry *list, int argc, char **argv) {
    int i, list_only = 0, verbose = 0, passed = 0, failed = 0, skipped = 0;
    const attn_test_entry *t;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0) list_only = 1;
        else if (strcmp(argv[i], "-v") == 0) verbose = 1;
        else if (argv[i][0] == '-') {
            printf("usage: %s [--list] [-v] [name-substring ...]\n", argv[0]);
            printf("0 passed, 1 failed, 0 skipped\n");
            fflush(stdout);
            return 1;
        }
    }
    if (list_only) {
        for (t = list; t->name; t++)
            if (attn_test__selected(t->name, argc, argv)) printf("%s\n", t->name);
        fflush(stdout);
        return 0;
    }
    printf("seed %llu\n", (unsigned long long)attn_test_seed());
    for (t = list; t->name; t++) {
        double t0;
        if (!attn_test__selected(t->name, argc, argv)) continue;
        attn_test__cur.name = t->name;
        attn_test__cur.failures = 0;
        attn_test__cur.checks = 0;
        attn_test__cur.skipped = 0;
        t0 = attn_test__now_ms();
        t->fn();
        t0 = attn_test__now_ms() - t0;
        if (attn_test__cur.failures) {  /* "FAIL name" and its lines are already out */
            if (attn_test__cur.failures > ATTN_TEST_MAX_FAILURE_LINES)
                printf("  ... %d more failures\n",
                       attn_test__cur.failures - ATTN_TEST_MAX_FAILURE_LINES);
            failed++;
        } else if (attn_test__cur.skipped) {
            skipped++;
        } else if (attn_test__cur.checks == 0) {  /* it ran no check: it proved nothing */
            printf("SKIP %s: no checks ran\n", t->name);
            skipped++;
        } else {
            if (verbose) printf("PASS %s (%.3f ms)\n", t->name, t0);
            else printf("PASS %s\n", t->name);
            passed++;
        }
        fflush(stdout);
    }
    attn_test__cur.name = 0;
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    fflush(stdout);
    return (failed == 0 && passed > 0) ? 0 : 1;
}

#endif /* ATTN_TEST_IMPLEMENTATION_INCLUDED */
#endif /* ATTN_TEST_IMPLEMENTATION */
