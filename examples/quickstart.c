#define ATTN_IMPLEMENTATION
#include "attn.h"
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    enum { T = 5, H = 4, HK = 2, D = 8 };           // one 5-token prompt, GQA 4:2
    float q[T * H * D], k[T * HK * D], v[T * HK * D], out[T * H * D];
    for (int i = 0; i < T * H * D; i++) q[i] = (float)((i * 7) % 11) / 11.0f;
    for (int i = 0; i < T * HK * D; i++) k[i] = (float)((i * 5) % 13) / 13.0f;
    for (int i = 0; i < T * HK * D; i++) v[i] = (float)(i % 17) / 17.0f;
    attn_params p = {0};
    p.num_heads = H; p.num_kv_heads = HK; p.head_size = D;   // scale 0 = 1/sqrt(D)
    int32_t cu[2] = {0, T};                                  // one sequence
    attn_rows rq = {q, ATTN_F32, 0}, rk = {k, ATTN_F32, 0};
    attn_rows rv = {v, ATTN_F32, 0}, ro = {out, ATTN_F32, 0};
    size_t ws_bytes = attn_sdpa_workspace_size(&p, NULL, cu, cu, 1);
    void *ws = malloc(ws_bytes);
    attn_status st = attn_sdpa(&p, NULL, rq, rk, rv, ro, cu, cu, 1, 1, NULL, ws, ws_bytes);
    printf("%s: out[last token, head 0, dim 0] = %f\n", attn_status_str(st),
           out[(T - 1) * H * D]);
    free(ws);
    return st == ATTN_OK ? 0 : 1;
}
