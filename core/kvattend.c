/* kvattend.c -- attention of a few query rows over a sequence's cache
 * (kvblocks.h), at memory speed: each KV head's keys and values are read
 * once per query row, by tiles of DEC_TILE tokens, for the H/Hkv query
 * heads of its group together, with an online softmax (running max, sum
 * and context per head). FP16 tiles are converted with F16C (AVX2) or
 * AVX-512, BF16 by a shift. The cache is cut into one run of tokens per
 * thread; the partial results are merged by the log-sum-exp rule (each
 * run's max m_i, sum l_i and context o_i: with m = max m_i, l = sum of
 * l_i e^(m_i - m) and o = sum of o_i e^(m_i - m) / l). One copy of the
 * loops per instruction set, picked at run time by the CPU's features (as
 * posenc.c). See kvattend.h. */
#include "core/kvattend.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cpuid.h>
#include <immintrin.h>

#include "core/band.h"
#include "core/blas.h"
#include "core/expf.h"
#include "core/kernels.h"
#include "core/variants.h"

#define DEC_TILE ATT_KV_TILE /* tokens per tile of keys (kvblocks.h) */
#define DEC_AHEAD 64 /* tokens ahead of the one computing that are prefetched */

/* ---- Conversions --------------------------------------------------------- */

uint16_t att_f32_to_f16(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    const uint16_t sign = (uint16_t)((b >> 16) & 0x8000u);
    b &= 0x7fffffffu;
    if (b >= 0x47800000u) /* ≥ 65536 (or inf/NaN): beyond the range */
        return (uint16_t)(sign | 0x7c00u);
    if (b < 0x38800000u) { /* below 2^-14: a subnormal half, m·2^-24 */
        const float a = fabsf(x) * 0x1p24f; /* exact: a power of two */
        return (uint16_t)(sign | (uint16_t)nearbyintf(a)); /* ties to even */
    }
    const uint32_t mant = b & 0x7fffffu, rem = mant & 0x1fffu;
    uint32_t h = ((((b >> 23) & 0xffu) - 112u) << 10) | (mant >> 13);
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++; /* a carry into the exponent is right, up to inf */
    return (uint16_t)(sign | h);
}

uint16_t att_f32_to_bf16(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    b += 0x7fffu + ((b >> 16) & 1u); /* ties to even; FLT_MAX rounds to inf */
    return (uint16_t)(b >> 16);
}

__attribute__((target("avx512f")))
static void f16_avx512(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
    for (; i < n; i++)
        dst[i] = att_f16_to_f32(src[i]);
}

__attribute__((target("avx2,f16c")))
static void f16_f16c(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++)
        dst[i] = att_f16_to_f32(src[i]);
}

static void f16_generic(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = att_f16_to_f32(src[i]);
}

__attribute__((target_clones("avx512f", "avx2", "default")))
static void bf16_any(float *dst, const uint16_t *src, size_t n)
{
    uint32_t *d32 = (uint32_t *)(void *)dst;
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        d32[i] = (uint32_t)src[i] << 16;
}

enum { ISA_GENERIC, ISA_AVX2, ISA_AVX512 };

static int dec_isa(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma"))
        return ISA_AVX512;
    unsigned a, b, c, d; /* F16C: cpuid 1, ecx (clang 14's builtin does not know it) */
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C))
        return ISA_AVX2;
    return ISA_GENERIC;
}

typedef void (*cvt_fn)(float *dst, const uint16_t *src, size_t n);

static cvt_fn cvt_for(int dtype, int isa)
{
    if (dtype == ATT_KV_BF16)
        return bf16_any;
    return isa == ISA_AVX512 ? f16_avx512 : isa == ISA_AVX2 ? f16_f16c : f16_generic;
}

void att_kv_to_f32(float *dst, const void *src, size_t n, int dtype)
{
    if (dtype == ATT_KV_F32)
        memcpy(dst, src, n * sizeof *dst);
    else
        cvt_for(dtype, dec_isa())(dst, src, n);
}

/* ---- The kernel ---------------------------------------------------------- */

/* A tile's scores: sc[k·DEC_TILE + r] = q_k · key r for the G heads of a
 * group and every column r of the tile KT (kvblocks.h: (d, DEC_TILE), as
 * the cache stores it; columns past the cache's end give scores nobody
 * reads). Its context: P_k += Σ_j sc[k·DEC_TILE + j]·V[j] over n value
 * rows. buf: DEC_TILE·d floats of scratch; pf: memory to ask for. */
typedef void (*scores_fn)(float *sc, const float *qg, int G, const void *KT, int d, int dt,
                          float *buf, const char *pf);
typedef void (*context_fn)(float *P, const float *sc, int G, const void *V, int n, int d, int dt,
                           float *buf, const char *pf);
/* dec_softmax for a whole tile (n = DEC_TILE, sc at its start). */
typedef int (*softmax_fn)(float *P, float *sc, int G, int d);

struct dec {
    const struct att_params *pv;
    const struct att_kv *c;
    const float *q;
    int L, H, G, d, Dq, nt, plain;
    int jlo, jhi;     /* the keys some row sees: [jlo, jhi) */
    float *part;      /* nt × L × H × (d + 2): max, sum, context */
    int isa;
    scores_fn scores; /* the inner loops (kvattend_simd.h, or plain) */
    context_fn context;
    softmax_fn softmax; /* or NULL: dec_softmax for every tile */
    int bad[ATT_MAX_THREADS];
};

/* The plain inner loops: the tile converted to float32 in buf first. */
static void plain_scores(float *sc, const float *qg, int G, const void *KT, int d, int dt,
                         float *buf, const char *pf)
{
    (void)pf;
    const float *Kf = KT;
    if (dt != ATT_KV_F32)
        att_kv_to_f32(buf, KT, (size_t)DEC_TILE * d, dt), Kf = buf;
    for (int k = 0; k < G; k++) {
        float *s = sc + k * DEC_TILE;
        const float *qk = qg + (size_t)k * d;
        for (int r = 0; r < DEC_TILE; r++)
            s[r] = 0.0f;
        for (int x = 0; x < d; x++) {
            const float qx = qk[x], *kx = Kf + (size_t)x * DEC_TILE;
#pragma omp simd
            for (int r = 0; r < DEC_TILE; r++)
                s[r] += qx * kx[r];
        }
    }
}

static void plain_context(float *P, const float *sc, int G, const void *V, int n, int d, int dt,
                          float *buf, const char *pf)
{
    (void)pf;
    const float *Vf = V;
    if (dt != ATT_KV_F32)
        att_kv_to_f32(buf, V, (size_t)n * d, dt), Vf = buf;
    for (int j = 0; j < n; j++) {
        const float *vj = Vf + (size_t)j * d;
        for (int k = 0; k < G; k++) {
            const float w = sc[k * DEC_TILE + j];
            float *acc = P + (size_t)k * (d + 2) + 2;
#pragma omp simd
            for (int x = 0; x < d; x++)
                acc[x] += w * vj[x];
        }
    }
}

#define SFX avx512
#define TGT __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma,f16c")))
#define VF __m512
#define VW 16
#define VZERO() _mm512_setzero_ps()
#define VLOAD(p) _mm512_loadu_ps(p)
#define VSTORE(p, v) _mm512_storeu_ps(p, v)
#define VSET1(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VLOADH(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define VLOADBF(p) \
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define VMAX(a, b) _mm512_max_ps(a, b)
#define VNOTBELOW(a, b) (int)_mm512_cmp_ps_mask(a, b, _CMP_NLT_UQ)
#define VREDMAX(v) _mm512_reduce_max_ps(v)
#define VREDADD(v) _mm512_reduce_add_ps(v)
#define UX 4
#include "core/kvattend_simd.h"
#undef SFX
#undef TGT
#undef VF
#undef VW
#undef VZERO
#undef VLOAD
#undef VSTORE
#undef VSET1
#undef VFMA
#undef VLOADH
#undef VLOADBF
#undef VMAX
#undef VNOTBELOW
#undef VREDMAX
#undef VREDADD
#undef UX

/* The max and the sum of a vector's 8 lanes (AVX-512 has them as
 * intrinsics). */
__attribute__((target("avx2"))) static inline float hmax_avx2(__m256 v)
{
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_max_ps(a, _mm_movehl_ps(a, a));
    return _mm_cvtss_f32(_mm_max_ss(a, _mm_shuffle_ps(a, a, 1)));
}

__attribute__((target("avx2"))) static inline float hadd_avx2(__m256 v)
{
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    return _mm_cvtss_f32(_mm_add_ss(a, _mm_shuffle_ps(a, a, 1)));
}

#define SFX avx2
#define TGT __attribute__((target("avx2,fma,f16c")))
#define VF __m256
#define VW 8
#define VZERO() _mm256_setzero_ps()
#define VLOAD(p) _mm256_loadu_ps(p)
#define VSTORE(p, v) _mm256_storeu_ps(p, v)
#define VSET1(x) _mm256_set1_ps(x)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VLOADH(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define VLOADBF(p) \
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define VMAX(a, b) _mm256_max_ps(a, b)
#define VNOTBELOW(a, b) _mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_NLT_UQ))
#define VREDMAX(v) hmax_avx2(v)
#define VREDADD(v) hadd_avx2(v)
#define UX 2
#include "core/kvattend_simd.h"

/* The online softmax: heads k < G with state P + k·(d + 2) (max, sum,
 * context) take the n scores of sc: new max and sum, the context rescaled,
 * and sc becomes the weights the context then adds. Returns 1 when a score
 * is +inf or NaN. */
static inline __attribute__((always_inline)) int dec_softmax(float *P, float *sc, int G, int n,
                                                             int d)
{
    int bad = 0;
    for (int k = 0; k < G; k++) {
        float *pk = P + (size_t)k * (d + 2), *s = sc + k * DEC_TILE;
        float mx = pk[0], chk = 0.0f;
#pragma omp simd reduction(max : mx) reduction(+ : chk)
        for (int j = 0; j < n; j++) {
            mx = s[j] > mx ? s[j] : mx;
            chk += s[j] == -INFINITY ? 0.0f : s[j] * 0.0f; /* NaN or +inf */
        }
        bad |= chk != 0.0f;
        if (mx == -INFINITY) { /* nothing seen yet: no weight */
            memset(s, 0, (size_t)n * sizeof *s);
            continue;
        }
        const float alpha = exp_nonpos(pk[0] - mx);
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < n; j++) {
            const float e = exp_nonpos(s[j] - mx);
            s[j] = e;
            sum += e;
        }
        pk[1] = pk[1] * alpha + sum;
        pk[0] = mx;
        if (alpha != 1.0f) {
            float *acc = pk + 2;
#pragma omp simd
            for (int x = 0; x < d; x++)
                acc[x] *= alpha;
        }
    }
    return bad;
}

/* Tokens of the tile at j: up to its end (a tile of keys is one unit of
 * memory, kvblocks.h), not past hi (a window can start a run anywhere). */
static inline int tile_len(int j, int hi)
{
    const int to_tile = DEC_TILE - j % DEC_TILE, to_hi = hi - j;
    return to_hi < to_tile ? to_hi : to_tile;
}

/* Thread t's run of tokens, every KV head and query row. buf: scratch of
 * DEC_TILE·d (the plain loops' float32 copy of a tile) + G·DEC_TILE floats. */
static inline __attribute__((always_inline)) void dec_part(struct dec *D, int t, float *buf)
{
    const struct att_kv *c = D->c;
    const struct att_params *pv = D->pv;
    const int d = D->d, G = D->G, L = D->L, H = D->H;
    const int span = D->jhi - D->jlo;
    /* runs of whole tiles from jlo (which may fall mid-tile: tile_len stops
     * each tile at its end) */
    const int tiles = (span + DEC_TILE - 1) / DEC_TILE;
    const int a = D->jlo + (int)((long long)tiles * t / D->nt) * DEC_TILE;
    int b = D->jlo + (int)((long long)tiles * (t + 1) / D->nt) * DEC_TILE;
    b = b > D->jhi ? D->jhi : b;
    float *kbuf = buf, *sc = buf + (size_t)DEC_TILE * d;
    for (int g = 0; g < c->Hkv; g++)
        for (int i = 0; i < L; i++) {
            float *P = D->part + (((size_t)t * L + i) * H + (size_t)g * G) * (d + 2);
            for (int k = 0; k < G; k++) {
                float *pk = P + (size_t)k * (d + 2);
                pk[0] = -INFINITY;
                memset(pk + 1, 0, (size_t)(d + 1) * sizeof *pk);
            }
            int lo, hi;
            att_visible_keys(pv, i, &lo, &hi);
            lo = lo < a ? a : lo;
            hi = hi > b ? b : hi;
            const float *qg = D->q + (size_t)i * D->Dq + (size_t)g * G * d;
            for (int j = lo; j < hi;) {
                const int n = tile_len(j, hi);
                const void *KT = att_kv_ktile(c, g, j), *V = att_kv_vrow(c, g, j);
                /* the tiles DEC_AHEAD tokens on are asked for while these compute */
                const int ja = j + DEC_AHEAD < hi ? j + DEC_AHEAD : -1;
                const char *pk = ja < 0 ? NULL : att_kv_ktile(c, g, ja);
                const char *pvr = ja < 0 ? NULL : att_kv_vrow(c, g, ja);
                /* the whole tile's scores; its columns j … j + n - 1 are used */
                D->scores(sc, qg, G, KT, d, c->dtype, kbuf, pk);
                float *sj = sc + j % DEC_TILE;
                for (int k = 0; !D->plain && k < G; k++) {
                    const int h = g * G + k;
                    struct att_row ar;
                    att_row_init(&ar, pv, 0, h, i, j, n,
                                 pv->alibi_slopes ? pv->alibi_slopes[h] : 0.0f);
                    att_row_finish(sj + k * DEC_TILE, pv, &ar);
                }
                D->bad[t] |= n == DEC_TILE && D->softmax ? D->softmax(P, sj, G, d)
                                                         : dec_softmax(P, sj, G, n, d);
                D->context(P, sj, G, V, n, d, c->dtype, kbuf, pvr);
                j += n;
            }
        }
}

__attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma,f16c")))
static void dec_part_avx512(struct dec *D, int t, float *buf)
{
    dec_part(D, t, buf);
}

__attribute__((target("avx2,fma,f16c")))
static void dec_part_avx2(struct dec *D, int t, float *buf)
{
    dec_part(D, t, buf);
}

static void dec_part_generic(struct dec *D, int t, float *buf)
{
    dec_part(D, t, buf);
}

/* Part t of the cache (att_parallel's task t). */
static void dec_task(void *arg, int t)
{
    struct dec *D = arg;
    float *buf = malloc(((size_t)DEC_TILE * D->d + (size_t)D->G * DEC_TILE) * sizeof *buf);
    if (!buf) {
        D->bad[t] = 1;
        return;
    }
    if (D->isa == ISA_AVX512)
        dec_part_avx512(D, t, buf);
    else if (D->isa == ISA_AVX2)
        dec_part_avx2(D, t, buf);
    else
        dec_part_generic(D, t, buf);
    free(buf);
}

/* ctx row i, head h = the log-sum-exp merge of the threads' partials.
 * Returns 1 when the row has no weight at all. */
static int dec_merge(const struct dec *D, float *ctx, int i, int h)
{
    const int d = D->d;
    float m = -INFINITY;
    for (int t = 0; t < D->nt; t++) {
        const float *pk = D->part + (((size_t)t * D->L + i) * D->H + h) * (d + 2);
        m = pk[0] > m ? pk[0] : m;
    }
    float *o = ctx + (size_t)i * D->Dq + (size_t)h * d;
    memset(o, 0, (size_t)d * sizeof *o);
    if (m == -INFINITY)
        return 1;
    float l = 0.0f;
    for (int t = 0; t < D->nt; t++) {
        const float *pk = D->part + (((size_t)t * D->L + i) * D->H + h) * (d + 2);
        if (pk[0] == -INFINITY)
            continue;
        const float sc = exp_nonpos(pk[0] - m);
        l += pk[1] * sc;
        for (int x = 0; x < d; x++)
            o[x] += sc * pk[2 + x];
    }
    if (!(l > 0.0f))
        return 1;
    const float inv = 1.0f / l;
    for (int x = 0; x < d; x++)
        o[x] *= inv;
    return 0;
}

int att_kv_attend(float *ctx, const float *q, const struct att_params *pv, const struct att_kv *c,
               int nt)
{
    const int L = pv->L, H = pv->H, d = c->d;
    struct dec D = {
        .pv = pv, .c = c, .q = q, .L = L, .H = H, .G = H / c->Hkv, .d = d, .Dq = H * d,
        .plain = pv->softcap <= 0.0f && !pv->alibi_slopes && pv->mask_kind != ATT_MASK_BOOL &&
                 pv->mask_kind != ATT_MASK_FLOAT && !pv->key_padding_mask,
        .isa = dec_isa(),
    };
    if (D.isa == ISA_AVX512 && d % 16 == 0)
        D.scores = ds_scores_avx512, D.context = ds_context_avx512, D.softmax = ds_softmax_avx512;
    else if (D.isa >= ISA_AVX2 && d % 8 == 0)
        D.scores = ds_scores_avx2, D.context = ds_context_avx2, D.softmax = ds_softmax_avx2;
    else
        D.scores = plain_scores, D.context = plain_context;
    D.jlo = pv->S, D.jhi = 0;
    for (int i = 0; i < L; i++) {
        int lo, hi;
        att_visible_keys(pv, i, &lo, &hi);
        if (lo < hi) {
            D.jlo = lo < D.jlo ? lo : D.jlo;
            D.jhi = hi > D.jhi ? hi : D.jhi;
        }
    }
    if (D.jhi <= D.jlo)
        return 1; /* no row sees a key */
    /* a thread per 64 Ki elements read at least: a small cache on one */
    const double elems = 2.0 * (D.jhi - D.jlo) * c->Hkv * (double)d * L;
    if (nt > (int)(elems / 65536.0))
        nt = (int)(elems / 65536.0);
    nt = nt < 1 ? 1 : nt > ATT_MAX_THREADS ? ATT_MAX_THREADS : nt;
    nt = att_gate_enter(nt);
    D.nt = nt;
    D.part = malloc((size_t)nt * L * H * (d + 2) * sizeof *D.part);
    int rc = !D.part;
    if (!rc) {
        att_parallel(nt, dec_task, &D); /* the runner's threads (blas.h) */
        for (int t = 0; t < nt; t++)
            rc |= D.bad[t];
        for (int i = 0; i < L && !rc; i++)
            for (int h = 0; h < H; h++)
                rc |= dec_merge(&D, ctx, i, h);
    }
    att_gate_leave(nt);
    free(D.part);
    return rc;
}
