/* rt_crc32c.c - CRC-32C: SSE4.2 instruction when present, slicing-by-8
 * tables otherwise. The tables are built once from the polynomial. */
#include "rt_crc32c.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#define RT_CRC32C_POLY 0x82F63B78u

static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static uint32_t (*crc_impl)(uint32_t, const uint8_t *, size_t);

static uint32_t crc_slice8(uint32_t c, const uint8_t *p, size_t n) {
    /* Byte steps until p is 8-aligned, then 8 bytes per step. */
    while (n > 0 && ((uintptr_t)p & 7) != 0) {
        c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        uint32_t lo =
            (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        uint32_t hi =
            (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        lo ^= c;
        c = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^ crc_tab[5][(lo >> 16) & 0xff] ^
            crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xff] ^ crc_tab[2][(hi >> 8) & 0xff] ^
            crc_tab[1][(hi >> 16) & 0xff] ^ crc_tab[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n > 0) {
        c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
        n--;
    }
    return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t c, const uint8_t *p,
                                                            size_t n) {
    uint64_t c64;
    while (n > 0 && ((uintptr_t)p & 7) != 0) {
        c = _mm_crc32_u8(c, *p++);
        n--;
    }
    c64 = c;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = _mm_crc32_u64(c64, v);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n > 0) {
        c = _mm_crc32_u8(c, *p++);
        n--;
    }
    return c;
}
#endif

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ RT_CRC32C_POLY : c >> 1;
        crc_tab[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
    crc_impl = crc_slice8;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2"))
        crc_impl = crc_sse42;
#endif
}

uint32_t rt_crc32c_extend(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    if (n == 0)
        return crc;
    return ~crc_impl(~crc, (const uint8_t *)data, n);
}

uint32_t rt__crc32c_extend_portable(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    if (n == 0)
        return crc;
    return ~crc_slice8(~crc, (const uint8_t *)data, n);
}

const char *rt_crc32c_impl(void) {
    pthread_once(&crc_once, crc_init);
#if defined(__x86_64__)
    if (crc_impl == crc_sse42)
        return "sse4.2";
#endif
    return "slice8";
}
