/* thread_pool.c - attn.h on the caller's own threads: pthreads, no OpenMP.

   What it shows: an engine that already has a thread pool hands it to the kernels through
   attn_exec.parallel_for (ATTN_NO_OPENMP keeps OpenMP out even when -fopenmp is given). The
   kernels split their work into items and call parallel_for(pool, items, threads, task, ctx);
   the pool runs task(ctx, item, thread) once per item with a thread index of its own in
   [0, threads). The result is bit for bit the single-thread result (attn.h's determinism
   promise), which this example checks, and it matches a double-precision reference.

   Build: cc -O2 -I. examples/thread_pool.c -o thread_pool -lm -lpthread */
#define _POSIX_C_SOURCE 200809L
#define ATTN_NO_OPENMP
#define ATTN_IMPLEMENTATION
#include "attn.h"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a minimal pool: the caller and WORKERS threads take items from a shared counter ---- */
enum { WORKERS = 3, THREADS = WORKERS + 1 };

typedef struct pool {
    pthread_mutex_t lock;
    pthread_cond_t work, done;
    pthread_t threads[WORKERS];
    attn_task_fn *task;     /* the current job */
    void *ctx;
    int items, next, finished, job, stop;
    int allowed;            /* runners with an index below this take part in the current job */
} pool;

/* Runs items of job `job` until none is left (or a later job started); thread is this runner's
   index. */
static void run_items(pool *p, int job, int thread) {
    for (;;) {
        pthread_mutex_lock(&p->lock);
        int item = p->job == job && p->next < p->items ? p->next++ : -1;
        pthread_mutex_unlock(&p->lock);
        if (item < 0) return;
        p->task(p->ctx, item, thread);
        pthread_mutex_lock(&p->lock);
        if (++p->finished == p->items) pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->lock);
    }
}

typedef struct worker_arg { pool *p; int thread; } worker_arg;
static worker_arg worker_args[WORKERS];

static void *worker(void *arg) {
    worker_arg *w = (worker_arg *)arg;
    int seen = 0;
    for (;;) {
        pthread_mutex_lock(&w->p->lock);
        while (w->p->job == seen && !w->p->stop) pthread_cond_wait(&w->p->work, &w->p->lock);
        int stop = w->p->stop, mine = w->thread < w->p->allowed;
        seen = w->p->job;
        pthread_mutex_unlock(&w->p->lock);
        if (stop) return NULL;
        if (mine) run_items(w->p, seen, w->thread);
    }
}

/* attn_parallel_for_fn: the caller runs items as thread 0, workers as 1..WORKERS; only those
   with an index below num_threads take part, as the contract asks (the kernels keep scratch
   per thread index). */
static void pool_parallel_for(void *self, int num_items, int num_threads, attn_task_fn *task,
                              void *ctx) {
    pool *p = (pool *)self;
    if (num_items <= 0) return;
    pthread_mutex_lock(&p->lock);
    p->task = task; p->ctx = ctx; p->items = num_items; p->next = 0; p->finished = 0;
    p->allowed = num_threads;
    p->job++;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    run_items(p, p->job, 0);
    pthread_mutex_lock(&p->lock);
    while (p->finished < p->items) pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

static int pool_start(pool *p) {
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    for (int i = 0; i < WORKERS; i++) {
        worker_args[i].p = p; worker_args[i].thread = i + 1;
        if (pthread_create(&p->threads[i], NULL, worker, &worker_args[i])) return 0;
    }
    return 1;
}

static void pool_stop(pool *p) {
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < WORKERS; i++) pthread_join(p->threads[i], NULL);
}

/* ---- the attention: two causal prompts, GQA 8:2, head size 64 ---- */
enum { H = 8, HK = 2, D = 64, T = 96 + 160, SEQS = 2 };

static float data_at(int kind, int i) { /* deterministic values in [-1, 1] */
    unsigned x = (unsigned)kind * 2654435761u + (unsigned)i * 40503u;
    x ^= x >> 15; x *= 0x2c1b3c6du; x ^= x >> 12;
    return (float)(x % 2001) / 1000.0f - 1.0f;
}

/* out row t, head h of causal attention within its sequence [s0, t], in double. */
static double reference(const float *q, const float *k, const float *v, int s0, int t, int h,
                        int d) {
    int g = h / (H / HK);
    double m = -INFINITY, sum = 0, acc = 0;
    for (int j = s0; j <= t; j++) {
        double dot = 0;
        for (int e = 0; e < D; e++) dot += (double)q[(t * H + h) * D + e] * k[(j * HK + g) * D + e];
        m = fmax(m, dot / sqrt((double)D));
    }
    for (int j = s0; j <= t; j++) {
        double dot = 0;
        for (int e = 0; e < D; e++) dot += (double)q[(t * H + h) * D + e] * k[(j * HK + g) * D + e];
        double w = exp(dot / sqrt((double)D) - m);
        sum += w;
        acc += w * v[(j * HK + g) * D + d];
    }
    return acc / sum;
}

static attn_status run(const attn_exec *exec, const float *q, const float *k, const float *v,
                       float *out) {
    attn_params p = {0};
    p.num_heads = H; p.num_kv_heads = HK; p.head_size = D;
    int32_t cu[SEQS + 1] = {0, 96, T};
    attn_rows rq = {(void *)q, ATTN_F32, 0}, rk = {(void *)k, ATTN_F32, 0};
    attn_rows rv = {(void *)v, ATTN_F32, 0}, ro = {out, ATTN_F32, 0};
    size_t bytes = attn_sdpa_workspace_size(&p, exec, cu, cu, SEQS);
    void *ws = malloc(bytes);
    attn_status st = attn_sdpa(&p, exec, rq, rk, rv, ro, cu, cu, SEQS, 1, NULL, ws, bytes);
    free(ws);
    return st;
}

int main(void) {
    static float q[T * H * D], k[T * HK * D], v[T * HK * D], serial[T * H * D], pooled[T * H * D];
    for (int i = 0; i < T * H * D; i++) q[i] = data_at(0, i);
    for (int i = 0; i < T * HK * D; i++) { k[i] = data_at(1, i); v[i] = data_at(2, i); }

    pool p;
    if (!pool_start(&p)) return 1;
    attn_exec one = {0}, many = {0};
    one.num_threads = 1;
    many.num_threads = THREADS;
    many.parallel_for = pool_parallel_for;
    many.pool = &p;
    attn_status a = run(&one, q, k, v, serial), b = run(&many, q, k, v, pooled);
    pool_stop(&p);
    if (a != ATTN_OK || b != ATTN_OK) {
        printf("attn_sdpa: %s / %s\n", attn_status_str(a), attn_status_str(b));
        return 1;
    }
    int same = memcmp(serial, pooled, sizeof serial) == 0;
    double worst = 0;
    for (int t = 0; t < T; t += 5)
        for (int h = 0; h < H; h++)
            for (int d = 0; d < D; d += 7)
                worst = fmax(worst, fabs(pooled[(t * H + h) * D + d] -
                                         reference(q, k, v, t < 96 ? 0 : 96, t, h, d)));
    printf("%s on %d pool threads (%s): bitwise %s the 1-thread result; "
           "worst |out - reference| = %.2e\n", attn_build_info(), THREADS,
           attn_isa_name(attn_best_isa()), same ? "equal to" : "DIFFERENT from", worst);
    return same && worst < 1e-5 ? 0 : 1;
}
