/* kvattend_simd.h -- the cache kernel's two inner loops (kvattend.c), written
 * once for any vector width: kvattend.c includes this file once per
 * instruction set after defining
 *   SFX          name suffix (avx512, avx2)
 *   TGT          the target attribute
 *   VF, VW       the float vector type and its lanes (DEC_TILE a multiple of 2·VW)
 *   VZERO() VLOAD(p) VSTORE(p, v) VSET1(x) VFMA(a, b, c)
 *   VLOADH(p) VLOADBF(p)   VW FP16 / BF16 elements at p, as floats
 *   UX           vectors per pass of the context (accumulators: UX × 4 heads)
 * Both take the cache's rows as they are stored (FP32, FP16, BF16): the
 * conversion happens in registers, the tile is read once from memory.
 * Rows are d elements, d a multiple of VW. Query heads go 4 at a time
 * (GB <= 4, a constant in each expansion). Internal to core/. */

#define DS_CAT2(a, b) a##_##b
#define DS_CAT(a, b) DS_CAT2(a, b)

/* VW elements of row data at element index i, as floats. */
static inline __attribute__((always_inline)) TGT VF DS_CAT(ds_load, SFX)(const void *base,
                                                                            size_t i, int dt)
{
    if (dt == ATT_KV_F32)
        return VLOAD((const float *)base + i);
    if (dt == ATT_KV_F16)
        return VLOADH((const uint16_t *)base + i);
    return VLOADBF((const uint16_t *)base + i);
}

/* sc[g·DEC_TILE + r] = qg[g] · column r of the tile KT (d, DEC_TILE),
 * g < GB, every r: at each x a vector of keys' elements and qg[g][x]
 * broadcast, by chunks of 2·VW columns (2·GB accumulators), no sums
 * across a vector. */
static inline __attribute__((always_inline)) TGT void
DS_CAT(ds_scores_gb, SFX)(float *sc, const float *qg, const void *KT, int d, const char *pf,
                          int dt, int GB)
{
    const size_t esz = dt == ATT_KV_F32 ? 4 : 2, line = (size_t)DEC_TILE * esz;
    for (int c0 = 0; c0 < DEC_TILE; c0 += 2 * VW) {
        VF a[4][2];
        for (int g = 0; g < GB; g++)
            a[g][0] = VZERO(), a[g][1] = VZERO();
        for (int x = 0; x < d; x++) {
            /* the tile ahead, the x-th of its d slices (not all at once:
             * a burst of prefetches stalls the loads behind it) */
            for (size_t o = 0; pf && c0 == 0 && o < line; o += 64)
                __builtin_prefetch(pf + (size_t)x * line + o, 0, 2);
            const size_t at = (size_t)x * DEC_TILE + (size_t)c0;
            const VF k0 = DS_CAT(ds_load, SFX)(KT, at, dt), k1 = DS_CAT(ds_load, SFX)(KT, at + VW, dt);
            for (int g = 0; g < GB; g++) {
                const VF q = VSET1(qg[(size_t)g * d + x]);
                a[g][0] = VFMA(q, k0, a[g][0]);
                a[g][1] = VFMA(q, k1, a[g][1]);
            }
        }
        for (int g = 0; g < GB; g++) {
            VSTORE(sc + g * DEC_TILE + c0, a[g][0]);
            VSTORE(sc + g * DEC_TILE + c0 + VW, a[g][1]);
        }
    }
}

/* acc_g += Σ_j sc[g·DEC_TILE + j]·V[j], g < GB; acc_g at P + g·(d + 2) + 2. */
static inline __attribute__((always_inline)) TGT void
DS_CAT(ds_context_gb, SFX)(float *P, const float *sc, const void *V, int n, int d,
                           const char *pf, int dt, int GB)
{
    const size_t row = (size_t)d * (dt == ATT_KV_F32 ? 4 : 2);
    int x = 0;
    for (; x + UX * VW <= d; x += UX * VW) {
        VF a[4][UX];
        for (int g = 0; g < GB; g++)
            for (int u = 0; u < UX; u++)
                a[g][u] = VLOAD(P + (size_t)g * (d + 2) + 2 + x + u * VW);
        for (int j = 0; j < n; j++) {
            /* the row DEC_AHEAD on, asked for as this one is used: spread
             * over the tile, not all at its start (a burst of prefetches
             * fills the miss buffers and stalls the loads behind it) */
            for (size_t o = 0; pf && x == 0 && o < row; o += 64)
                __builtin_prefetch(pf + (size_t)j * row + o, 0, 2);
            VF v[UX];
            for (int u = 0; u < UX; u++)
                v[u] = DS_CAT(ds_load, SFX)(V, (size_t)j * d + x + u * VW, dt);
            for (int g = 0; g < GB; g++) {
                const VF w = VSET1(sc[g * DEC_TILE + j]);
                for (int u = 0; u < UX; u++)
                    a[g][u] = VFMA(w, v[u], a[g][u]);
            }
        }
        for (int g = 0; g < GB; g++)
            for (int u = 0; u < UX; u++)
                VSTORE(P + (size_t)g * (d + 2) + 2 + x + u * VW, a[g][u]);
    }
    for (; x < d; x += VW) {
        VF a[4];
        for (int g = 0; g < GB; g++)
            a[g] = VLOAD(P + (size_t)g * (d + 2) + 2 + x);
        for (int j = 0; j < n; j++) {
            const VF v = DS_CAT(ds_load, SFX)(V, (size_t)j * d + x, dt);
            for (int g = 0; g < GB; g++)
                a[g] = VFMA(VSET1(sc[g * DEC_TILE + j]), v, a[g]);
        }
        for (int g = 0; g < GB; g++)
            VSTORE(P + (size_t)g * (d + 2) + 2 + x, a[g]);
    }
}

/* e^x for x <= 0, lane by lane: exp_nonpos (expf.h) written with GCC's
 * vector operators, the same operations in the same order, so the compiler
 * contracts the same multiply-adds and each lane has the scalar's bits. */
static inline __attribute__((always_inline)) TGT VF DS_CAT(ds_exp, SFX)(VF x)
{
    typedef int vi __attribute__((vector_size(sizeof(VF))));
    const vi in_range = x >= VSET1(-104.0f); /* all ones or zero */
    const VF xc = (VF)(((vi)x & in_range) | ((vi)VSET1(-104.0f) & ~in_range));
    const vi n = __builtin_convertvector(xc * 1.44269504f - 0.5f, vi);
    const VF fn = __builtin_convertvector(n, VF);
    const VF r = xc - fn * 0.693359375f + fn * 2.12194440e-4f;
    VF p = VSET1(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const vi n1 = n >> 1, n2 = n - n1;
    const VF e = p * (VF)((n1 + 127) << 23) * (VF)((n2 + 127) << 23);
    return (VF)((vi)e & in_range);
}

/* dec_softmax (kvattend.c) for a whole tile of GB heads: the scores of head
 * g at sc + g·DEC_TILE, its state (max, sum, context) at P + g·(d + 2); the
 * tile's max and sum as vector reductions, its exps and the rescaling
 * factor as vector exps. Returns 1 when a score is +inf or NaN. */
static inline __attribute__((always_inline)) TGT int
DS_CAT(ds_softmax_gb, SFX)(float *P, float *sc, int d, int GB)
{
    enum { NV = DEC_TILE / VW };
    VF s[4][NV];
    int bad = 0;
    float mx[4];
    for (int g = 0; g < GB; g++) {
        VF m = VSET1(P[(size_t)g * (d + 2)]);
        for (int v = 0; v < NV; v++) {
            s[g][v] = VLOAD(sc + g * DEC_TILE + v * VW);
            bad |= VNOTBELOW(s[g][v], VSET1(INFINITY)); /* NaN or +inf */
            m = VMAX(m, s[g][v]);
        }
        mx[g] = VREDMAX(m);
    }
    for (int g = 0; g < GB; g++) {
        float *pk = P + (size_t)g * (d + 2), *sg = sc + g * DEC_TILE;
        if (mx[g] == -INFINITY) { /* nothing seen yet: no weight */
            for (int v = 0; v < NV; v++)
                VSTORE(sg + v * VW, VZERO());
            continue;
        }
        const VF m = VSET1(mx[g]);
        VF sum = VZERO();
        for (int v = 0; v < NV; v++) {
            const VF e = DS_CAT(ds_exp, SFX)(s[g][v] - m);
            VSTORE(sg + v * VW, e);
            sum += e;
        }
        /* e^0 is 1 exactly: the exp only when the max moved */
        const float alpha = mx[g] == pk[0] ? 1.0f : DS_CAT(ds_exp, SFX)(VSET1(pk[0] - mx[g]))[0];
        pk[1] = pk[1] * alpha + VREDADD(sum);
        pk[0] = mx[g];
        if (alpha != 1.0f)
            for (int x = 0; x < d; x += VW)
                VSTORE(pk + 2 + x, VLOAD(pk + 2 + x) * VSET1(alpha));
    }
    return bad;
}

/* The G heads of a group, 4 at a time, each expansion with constant GB
 * and dtype (so that the accumulators stay in registers). */
#define DS_BY_GB(fn, dt, ...)                                                                     \
    switch (GB) {                                                                                 \
    case 4: fn(__VA_ARGS__, dt, 4); break;                                                        \
    case 3: fn(__VA_ARGS__, dt, 3); break;                                                        \
    case 2: fn(__VA_ARGS__, dt, 2); break;                                                        \
    default: fn(__VA_ARGS__, dt, 1); break;                                                       \
    }
#define DS_BY_DT(fn, ...)                                                                         \
    do {                                                                                          \
        if (dt == ATT_KV_F32) {                                                                   \
            DS_BY_GB(fn, ATT_KV_F32, __VA_ARGS__)                                                 \
        } else if (dt == ATT_KV_F16) {                                                            \
            DS_BY_GB(fn, ATT_KV_F16, __VA_ARGS__)                                                 \
        } else {                                                                                  \
            DS_BY_GB(fn, ATT_KV_BF16, __VA_ARGS__)                                                \
        }                                                                                         \
    } while (0)

TGT static void DS_CAT(ds_scores, SFX)(float *sc, const float *qg, int G, const void *KT, int d,
                                       int dt, float *buf, const char *pf)
{
    (void)buf;
    for (int k0 = 0; k0 < G; k0 += 4) {
        const int GB = G - k0 < 4 ? G - k0 : 4;
        float *s = sc + k0 * DEC_TILE;
        const float *q = qg + (size_t)k0 * d;
        DS_BY_DT(DS_CAT(ds_scores_gb, SFX), s, q, KT, d, k0 ? NULL : pf);
    }
}

TGT static void DS_CAT(ds_context, SFX)(float *P, const float *sc, int G, const void *V, int n,
                                        int d, int dt, float *buf, const char *pf)
{
    (void)buf;
    for (int k0 = 0; k0 < G; k0 += 4) {
        const int GB = G - k0 < 4 ? G - k0 : 4;
        float *p = P + (size_t)k0 * (d + 2);
        const float *s = sc + k0 * DEC_TILE;
        DS_BY_DT(DS_CAT(ds_context_gb, SFX), p, s, V, n, d, k0 ? NULL : pf);
    }
}

/* The online softmax of a whole tile (n = DEC_TILE) for the G heads of a
 * group; as dec_softmax (kvattend.c). */
TGT static int DS_CAT(ds_softmax, SFX)(float *P, float *sc, int G, int d)
{
    int bad = 0;
    for (int k0 = 0; k0 < G; k0 += 4) {
        float *p = P + (size_t)k0 * (d + 2), *s = sc + k0 * DEC_TILE;
        switch (G - k0 < 4 ? G - k0 : 4) {
        case 4: bad |= DS_CAT(ds_softmax_gb, SFX)(p, s, d, 4); break;
        case 3: bad |= DS_CAT(ds_softmax_gb, SFX)(p, s, d, 3); break;
        case 2: bad |= DS_CAT(ds_softmax_gb, SFX)(p, s, d, 2); break;
        default: bad |= DS_CAT(ds_softmax_gb, SFX)(p, s, d, 1); break;
        }
    }
    return bad;
}

#undef DS_BY_DT
#undef DS_BY_GB
