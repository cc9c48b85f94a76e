// Inserted into llama.cpp's ggml/src/ggml-cpu/ops.cpp by scripts/build_llama_cpp.py, before
// ggml_compute_forward_flash_attn_ext_f16_one_chunk, which calls it (see that script's PATCHES).
// Part of ragsweep; measured in experiments/results/cpu_speed.md ("Decoding over a long context").
//
// FP16 K/V attention for a few query rows at a time (decoding, short batches) on x86.
// Up to FAV_G query rows (all heads of a decoded token) are handled together, so the K and V cache
// is read in address order (a position's heads lie side by side) once per block of positions: the
// block is scored first, exponentiated in one vectorized pass per row and accumulated in FP32
// registers. The reference loop below does one dot-product call, one expf and one FP16 round trip
// of the accumulator per position and query row, and reads each head's slice of the cache apart.
#if (defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))) && defined(__F16C__)
#define RAGSWEEP_FA_VEC 1
// Exported mark of the patch in every CPU variant whose code runs the kernel: tests read it from the
// built library (tests/system/test_cpu_dispatch.py), so a build that lost the patch fails them.
extern "C" __attribute__((visibility("default"), used)) const char ragsweep_flash_attn_rows[] = "flash_attn_rows";
#if defined(__AVX512F__)
#define FAV_L 16
typedef __m512 fav_t;
static inline fav_t fav_load_h(const ggml_fp16_t * p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) p)); }
static inline fav_t fav_load(const float * p) { return _mm512_loadu_ps(p); }
static inline void  fav_store(float * p, fav_t v) { _mm512_storeu_ps(p, v); }
static inline fav_t fav_fma(fav_t a, fav_t b, fav_t c) { return _mm512_fmadd_ps(a, b, c); }
static inline fav_t fav_set1(float x) { return _mm512_set1_ps(x); }
static inline fav_t fav_zero(void) { return _mm512_setzero_ps(); }
static inline float fav_sum(fav_t v) { return _mm512_reduce_add_ps(v); }
#else
#define FAV_L 8
typedef __m256 fav_t;
static inline fav_t fav_load_h(const ggml_fp16_t * p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) p)); }
static inline fav_t fav_load(const float * p) { return _mm256_loadu_ps(p); }
static inline void  fav_store(float * p, fav_t v) { _mm256_storeu_ps(p, v); }
static inline fav_t fav_fma(fav_t a, fav_t b, fav_t c) { return _mm256_fmadd_ps(a, b, c); }
static inline fav_t fav_set1(float x) { return _mm256_set1_ps(x); }
static inline fav_t fav_zero(void) { return _mm256_setzero_ps(); }
static inline float fav_sum(fav_t v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#endif

static constexpr int     FAV_G   = 16;   // query rows per group, at most
static constexpr int64_t FAV_BLK = 64;   // KV positions per block
static constexpr int64_t FAV_D   = 256;  // largest head size handled

static bool ggml_fa_vec_supported(const ggml_tensor * q, const ggml_tensor * k, const ggml_tensor * v) {
    return q->type == GGML_TYPE_F32 && k->type == GGML_TYPE_F16 && v->type == GGML_TYPE_F16 &&
           k->ne[0] % FAV_L == 0 && v->ne[0] % FAV_L == 0 && k->ne[0] <= FAV_D && v->ne[0] <= FAV_D;
}

// rows [ir0, ir1) over KV positions [ic_start, ic_end): the same results (M, S, VKQ per row) as the
// reference loop, written the same way (partials, or the normalized output).
static void ggml_fa_vec_rows(const ggml_tensor * dst, int ir0, int ir1, int64_t ic_start, int64_t ic_end,
                             float * partials, int64_t partial_stride) {
    const ggml_tensor * q     = dst->src[0];
    const ggml_tensor * k     = dst->src[1];
    const ggml_tensor * v     = dst->src[2];
    const ggml_tensor * mask  = dst->src[3];
    const ggml_tensor * sinks = dst->src[4];

    const int64_t DK = k->ne[0], DV = v->ne[0];
    const int64_t neq1 = q->ne[1], neq2 = q->ne[2];
    const int64_t rk2 = q->ne[2]/k->ne[2], rk3 = q->ne[3]/k->ne[3];
    const int64_t rv2 = q->ne[2]/v->ne[2], rv3 = q->ne[3]/v->ne[3];

    float scale = 1.0f, max_bias = 0.0f, logit_softcap = 0.0f;
    memcpy(&scale,         (float *) dst->op_params + 0, sizeof(float));
    memcpy(&max_bias,      (float *) dst->op_params + 1, sizeof(float));
    memcpy(&logit_softcap, (float *) dst->op_params + 2, sizeof(float));
    if (logit_softcap != 0) {
        scale /= logit_softcap;
    }
    const uint32_t n_head      = neq2;
    const uint32_t n_head_log2 = 1u << (uint32_t) floor(log2(n_head));
    const float m0 = powf(2.0f, -(max_bias       ) / n_head_log2);
    const float m1 = powf(2.0f, -(max_bias / 2.0f) / n_head_log2);

    alignas(64) float Q[FAV_G][FAV_D];
    alignas(64) float VKQ[FAV_G][FAV_D];
    alignas(64) float sb[FAV_G][FAV_BLK];
    const ggml_fp16_t * mp[FAV_G];
    float slope[FAV_G], M[FAV_G], S[FAV_G];
    int64_t iq1s[FAV_G], iq2s[FAV_G], iq3s[FAV_G];
    const char * kbase[FAV_G];
    const char * vbase[FAV_G];

    for (int ir = ir0; ir < ir1; ) {
        // a group: up to FAV_G consecutive rows, each with its own K and V head
        int G = 0;
        for (; G < FAV_G && ir + G < ir1; ++G) {
            const int r = ir + G;
            const int64_t iq3 = r/(neq2*neq1);
            const int64_t iq2 = (r - iq3*neq2*neq1)/neq1;
            const int64_t iq1 = (r - iq3*neq2*neq1 - iq2*neq1);
            kbase[G] = (const char *) k->data + (iq2/rk2)*k->nb[2] + (iq3/rk3)*k->nb[3];
            vbase[G] = (const char *) v->data + (iq2/rv2)*v->nb[2] + (iq3/rv3)*v->nb[3];
            iq1s[G] = iq1; iq2s[G] = iq2; iq3s[G] = iq3;
            const uint32_t h = iq2;
            slope[G] = (max_bias > 0.0f) ? h < n_head_log2 ? powf(m0, h + 1) : powf(m1, 2*(h - n_head_log2) + 1) : 1.0f;
            mp[G] = mask ? (const ggml_fp16_t *)((const char *) mask->data + iq1*mask->nb[1] + (iq2%mask->ne[2])*mask->nb[2] + (iq3%mask->ne[3])*mask->nb[3]) : NULL;
            memcpy(Q[G], (const char *) q->data + iq1*q->nb[1] + iq2*q->nb[2] + iq3*q->nb[3], DK*sizeof(float));
            memset(VKQ[G], 0, DV*sizeof(float));
            M[G] = -INFINITY;
            S[G] = 0.0f;
        }

        for (int64_t ib = ic_start; ib < ic_end; ib += FAV_BLK) {
            const int64_t nbl = std::min(FAV_BLK, ic_end - ib);
            bool live[FAV_BLK];
            float Mb[FAV_G];
            for (int g = 0; g < G; ++g) {
                Mb[g] = -INFINITY;
            }
            // scores: the K rows of a position read together for the group
            for (int64_t j = 0; j < nbl; ++j) {
                const int64_t ic = ib + j;
                float mv[FAV_G];
                bool any = false;
                for (int g = 0; g < G; ++g) {
                    mv[g] = mp[g] ? slope[g]*GGML_CPU_FP16_TO_FP32(mp[g][ic]) : 0.0f;
                    any |= mv[g] != -INFINITY;
                }
                live[j] = any;
                if (!any) {
                    for (int g = 0; g < G; ++g) {
                        sb[g][j] = -INFINITY;
                    }
                    continue;
                }
                fav_t acc[FAV_G];
                for (int g = 0; g < G; ++g) {
                    const ggml_fp16_t * kr = (const ggml_fp16_t *) (kbase[g] + ic*k->nb[1]);
                    acc[g] = fav_zero();
                    for (int64_t d = 0; d < DK; d += FAV_L) {
                        acc[g] = fav_fma(fav_load_h(kr + d), fav_load(Q[g] + d), acc[g]);
                    }
                }
                for (int g = 0; g < G; ++g) {
                    if (mv[g] == -INFINITY) {
                        sb[g][j] = -INFINITY;
                        continue;
                    }
                    float s = fav_sum(acc[g])*scale;
                    if (logit_softcap != 0.0f) {
                        s = logit_softcap*tanhf(s);
                    }
                    s += mv[g];
                    sb[g][j] = s;
                    Mb[g] = std::max(Mb[g], s);
                }
            }
            // one vectorized exp per row, the running max and sum updated once per block
            bool any_row = false;
            for (int g = 0; g < G; ++g) {
                if (Mb[g] == -INFINITY) {
                    for (int64_t j = 0; j < nbl; ++j) {
                        sb[g][j] = 0.0f;
                    }
                    continue;
                }
                any_row = true;
                if (Mb[g] > M[g]) {
                    const float ms = expf(M[g] - Mb[g]);  // 0 on a row's first block that counts
                    ggml_vec_scale_f32(DV, VKQ[g], ms);
                    S[g] *= ms;
                    M[g] = Mb[g];
                }
                S[g] += (float) ggml_vec_soft_max_f32((int) nbl, sb[g], sb[g], M[g]);
            }
            if (!any_row) {
                continue;
            }
            // values: each V row read once for the group, the accumulators held in registers
            for (int64_t d = 0; d < DV; d += FAV_L) {
                fav_t acc[FAV_G];
                for (int g = 0; g < G; ++g) {
                    acc[g] = fav_load(VKQ[g] + d);
                }
                for (int64_t j = 0; j < nbl; ++j) {
                    if (!live[j]) {
                        continue;
                    }
                    for (int g = 0; g < G; ++g) {
                        const fav_t vv = fav_load_h((const ggml_fp16_t *) (vbase[g] + (ib + j)*v->nb[1]) + d);
                        acc[g] = fav_fma(vv, fav_set1(sb[g][j]), acc[g]);
                    }
                }
                for (int g = 0; g < G; ++g) {
                    fav_store(VKQ[g] + d, acc[g]);
                }
            }
        }

        for (int g = 0; g < G; ++g) {
            const int r = ir + g;
            float Mg = M[g], Sg = S[g];
            // sinks - apply only on the first kv-chunk
            if (sinks && ic_start == 0) {
                const float s = ((const float *) sinks->data)[iq2s[g]];
                float ms = 1.0f, vs = 1.0f;
                if (s > Mg) {
                    ms = expf(Mg - s);
                    Mg = s;
                    ggml_vec_scale_f32(DV, VKQ[g], ms);
                } else {
                    vs = expf(s - Mg);
                }
                Sg = Sg*ms + vs;
            }
            if (partials != nullptr) {
                float * partial = partials + r * partial_stride;
                partial[0] = Mg;
                partial[1] = Sg;
                memcpy(partial + 2, VKQ[g], DV*sizeof(float));
            } else {
                const float S_inv = Sg == 0.0f ? 0.0f : 1.0f/Sg;
                ggml_vec_scale_f32(DV, VKQ[g], S_inv);
                const int64_t ne1 = dst->ne[1], ne2 = dst->ne[2];
                // permute(0, 2, 1, 3)
                memcpy((char *) dst->data + (iq3s[g]*ne2*ne1 + iq2s[g] + iq1s[g]*ne1)*dst->nb[1], VKQ[g], dst->nb[1]);
            }
        }
        ir += G;
    }
}
#endif  // RAGSWEEP_FA_VEC

