/* make_checkpoint.c - writes a deterministic random-weight checkpoint in the llama2.c format and a
   matching toy tokenizer, so that examples/llama.c, its test and `make run` work offline.

   Checkpoint (all little-endian, as llama2.c's legacy export writes it):
       int32 dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
             (vocab_size < 0: the classifier is not the token embedding)
       float token_embedding[vocab][dim], rms_att[L][dim], wq[L][H*hs][dim], wk[L][Hk*hs][dim],
             wv[L][Hk*hs][dim], wo[L][dim][H*hs], rms_ffn[L][dim], w1[L][hidden][dim],
             w2[L][dim][hidden], w3[L][hidden][dim], rms_final[dim],
             freq_cis_real[seq_len][hs/2], freq_cis_imag[seq_len][hs/2] (legacy, readers skip
             them), and wcls[vocab][dim] when unshared.
   Tokenizer: int32 max_token_length, then per token: float score, int32 length, the bytes.
   Ids 0..2 are <unk>, <s>, </s>; 3..258 the byte tokens <0x00>..<0xFF>; then the printable ASCII
   characters; then merges of two and three characters over " etaoinshrdlucmfwypvbgkjqxz"
   (each the concatenation of two earlier tokens, so byte-pair merging reaches it).
   The weights are scaled so that activations stay O(1) (std 1/sqrt(fan_in), residual branches
   halved) and the classifier gives logits of std ~4: greedy decoding wanders, it does not
   repeat one token.

   Build: cc -O2 -I. examples/make_checkpoint.c -o make_checkpoint -lm
   Usage: make_checkpoint [--tiny] [--dim N] [--hidden N] [--layers N] [--heads N]
                          [--kv-heads N] [--vocab N] [--seq-len N] [--shared] [--seed N]
                          [-o model.bin] [-z tokenizer.bin]
   Defaults: dim 512, 8 heads, 2 KV heads, 6 layers, vocab 4096, seq_len 2048, unshared
   classifier; --tiny: dim 64, 4 heads, 2 KV heads, 2 layers, vocab 512, seq_len 256.
   With no arguments it writes the tiny checkpoint to a temporary file, reads it back, checks
   the header and size, and exits 0. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int dim, hidden, layers, heads, kv_heads, vocab, seq_len, shared;
    uint64_t seed;
} config;

static uint64_t rng_state;
static float uniform(void) { /* [-1, 1), xorshift64* */
    rng_state ^= rng_state >> 12; rng_state ^= rng_state << 25; rng_state ^= rng_state >> 27;
    return (float)((rng_state * 2685821657736338717ull) >> 40) / 8388608.0f - 1.0f;
}

/* n floats of standard deviation std (uniform: half-width std * sqrt(3)), plus a constant. */
static int put(FILE *f, size_t n, float std, float base) {
    float buf[1024];
    while (n > 0) {
        size_t m = n < 1024 ? n : 1024;
        for (size_t i = 0; i < m; i++) buf[i] = base + std * 1.7320508f * uniform();
        if (fwrite(buf, sizeof(float), m, f) != m) return 0;
        n -= m;
    }
    return 1;
}

static int write_checkpoint(const config *c, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int hs = c->dim / c->heads, kvd = c->kv_heads * hs, L = c->layers, D = c->dim;
    int32_t hdr[7] = {c->dim, c->hidden, c->layers, c->heads, c->kv_heads,
                      c->shared ? c->vocab : -c->vocab, c->seq_len};
    size_t l = (size_t)L, d = (size_t)D;
    float sd = 1.0f / sqrtf((float)D), sh = 1.0f / sqrtf((float)c->hidden);
    rng_state = c->seed * 0x9e3779b97f4a7c15ull + 1;
    int ok = fwrite(hdr, sizeof hdr, 1, f) == 1 &&
             put(f, (size_t)c->vocab * d, 1.0f, 0.0f) &&             /* token embedding */
             put(f, l * d, 0.05f, 1.0f) &&                            /* rms_att */
             put(f, l * d * d, sd, 0.0f) &&                           /* wq */
             put(f, l * (size_t)kvd * d, sd, 0.0f) &&                 /* wk */
             put(f, l * (size_t)kvd * d, sd, 0.0f) &&                 /* wv */
             put(f, l * d * d, 0.5f * sd, 0.0f) &&                    /* wo */
             put(f, l * d, 0.05f, 1.0f) &&                            /* rms_ffn */
             put(f, l * (size_t)c->hidden * d, sd, 0.0f) &&           /* w1 */
             put(f, l * d * (size_t)c->hidden, 0.5f * sh, 0.0f) &&    /* w2 */
             put(f, l * (size_t)c->hidden * d, sd, 0.0f) &&           /* w3 */
             put(f, d, 0.05f, 1.0f);                                  /* rms_final */
    for (int part = 0; ok && part < 2; part++)  /* legacy freq_cis_real, then _imag */
        for (int p = 0; ok && p < c->seq_len; p++)
            for (int i = 0; ok && i < hs / 2; i++) {
                double a = p * pow(10000.0, -2.0 * i / hs);
                float v = (float)(part == 0 ? cos(a) : sin(a));
                ok = fwrite(&v, sizeof v, 1, f) == 1;
            }
    if (ok && !c->shared) ok = put(f, (size_t)c->vocab * d, 4.0f * sd, 0.0f);  /* wcls */
    return fclose(f) == 0 && ok;
}

static int put_token(FILE *f, const char *s, int len, float score) {
    int32_t n = len;
    return fwrite(&score, sizeof score, 1, f) == 1 && fwrite(&n, sizeof n, 1, f) == 1 &&
           fwrite(s, 1, (size_t)len, f) == (size_t)len;
}

static int write_tokenizer(int vocab, const char *path) {
    static const char alpha[] = " etaoinshrdlucmfwypvbgkjqxz";
    const int A = (int)sizeof alpha - 1;
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int32_t max_len = 16;
    int ok = fwrite(&max_len, sizeof max_len, 1, f) == 1, id = 0;
    char s[16];
    static const char *special[3] = {"<unk>", "<s>", "</s>"};
    for (; ok && id < 3 &&
         id < vocab; id++) ok = put_token(f, special[id], (int)strlen(special[id]), 0.0f);
    for (int b = 0; ok && b < 256 && id < vocab; b++, id++) {
        sprintf(s, "<0x%02X>", b);
        ok = put_token(f, s, 6, 0.0f);
    }
    for (int ch = 32; ok && ch < 127 && id < vocab; ch++, id++) {
        s[0] = (char)ch;
        ok = put_token(f, s, 1, 0.0f);
    }
    /* merges: two characters, then three; a higher score merges first (shorter, commoner) */
    for (int len = 2; ok && len <= 3 && id < vocab; len++) {
        int total = len == 2 ? A * A : A * A * A;
        for (int k = 0; ok && k < total && id < vocab; k++) {
            int x = k;
            for (int j = len - 1; j >= 0; j--) { s[j] = alpha[x % A]; x /= A; }
            if (len == 2 && s[1] == ' ') continue;   /* no token ends with a space */
            if (len == 3 && (s[1] == ' ' || s[2] == ' ')) continue;
            ok = put_token(f, s, len, -(float)id);
            id++;
        }
    }
    for (; ok && id < vocab; id++) {  /* a vocabulary larger than the merges: spare ids */
        int n = sprintf(s, "<%d>", id % 100000);
        ok = put_token(f, s, n, -1e6f);
    }
    return fclose(f) == 0 && ok;
}

static void tiny(config *c) {
    c->dim = 64; c->hidden = 192; c->layers = 2; c->heads = 4; c->kv_heads = 2;
    c->vocab = 512; c->seq_len = 256;
}

int main(int argc, char **argv) {
    config c = {512, 0, 6, 8, 2, 4096, 2048, 0, 1};
    const char *out = "model.bin", *tok = "tokenizer.bin";
    int selftest = argc == 1;
    char tmp[64];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--tiny")) { tiny(&c); continue; }
        if (!strcmp(a, "--shared")) { c.shared = 1; continue; }
        if (!v) { fprintf(stderr, "%s: missing value or unknown flag\n", a); return 1; }
        i++;
        if (!strcmp(a, "--dim")) c.dim = atoi(v);
        else if (!strcmp(a, "--hidden")) c.hidden = atoi(v);
        else if (!strcmp(a, "--layers")) c.layers = atoi(v);
        else if (!strcmp(a, "--heads")) c.heads = atoi(v);
        else if (!strcmp(a, "--kv-heads")) c.kv_heads = atoi(v);
        else if (!strcmp(a, "--vocab")) c.vocab = atoi(v);
        else if (!strcmp(a, "--seq-len")) c.seq_len = atoi(v);
        else if (!strcmp(a, "--seed")) c.seed = (uint64_t)strtoull(v, NULL, 10);
        else if (!strcmp(a, "-o")) out = v;
        else if (!strcmp(a, "-z")) tok = v;
        else { fprintf(stderr, "unknown flag %s\n", a); return 1; }
    }
    if (selftest) {
        tiny(&c);
        sprintf(tmp, "/tmp/attn_ckpt_selftest_%ld.bin", (long)(uintptr_t)&c % 100000);
        out = tmp; tok = NULL;
    }
    if (c.hidden <= 0) c.hidden = ((8 * c.dim / 3) + 31) / 32 * 32;  /* llama: 2/3 of 4*dim */
    if (c.dim < 2 || c.heads < 1 || c.kv_heads < 1 || c.dim % c.heads || c.heads % c.kv_heads ||
        (c.dim / c.heads) % 2 || c.layers < 1 || c.vocab < 4 || c.seq_len < 1) {
        fprintf(stderr, "bad shape: dim %% heads, heads %% kv_heads and head size must be even\n");
        return 1;
    }
    if (!write_checkpoint(&c, out) || (tok && !write_tokenizer(c.vocab, tok))) {
        fprintf(stderr, "cannot write %s\n", out);
        return 1;
    }
    int hs = c.dim / c.heads;
    double params = (double)c.vocab * c.dim * (c.shared ? 1 : 2) +
                    (double)c.layers * (2.0 * c.dim * c.dim + 2.0 * c.kv_heads * hs * c.dim +
                                        3.0 * c.dim * c.hidden + 2.0 * c.dim) + c.dim;
    printf("%s: dim %d, hidden %d, %d layers, %d heads, %d KV heads, vocab %d, seq_len %d, %s "
           "classifier, %.1fM parameters%s%s\n", out, c.dim, c.hidden, c.layers, c.heads,
           c.kv_heads, c.vocab, c.seq_len, c.shared ? "shared" : "unshared", params / 1e6,
           tok ? "; tokenizer " : "", tok ? tok : "");
    if (selftest) {  /* read it back: header, and the file size llama2.c's reader expects */
        FILE *f = fopen(out, "rb");
        int32_t h[7] = {0};
        long size = 0;
        if (f && fread(h, sizeof h, 1, f) == 1 && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
        if (f) fclose(f);
        remove(out);
        double want = 28.0 + 4.0 * (params + (double)c.seq_len * hs);
        int ok = h[0] == c.dim && h[5] == -c.vocab && (double)size == want;
        printf("%s\n", ok ? "ok" : "FAILED: header or size");
        return ok ? 0 : 1;
    }
    return 0;
}
