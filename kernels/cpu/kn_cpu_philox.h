/* kn_cpu_philox.h - the Philox4x32-10 counter-based generator (Salmon et
 * al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) as TensorFlow's
 * stateless random ops use it, and TensorFlow's mapping of its 32-bit words
 * to floats. Internal to kernels/cpu; exposed for the unit tests. */
#ifndef KN_CPU_PHILOX_H
#define KN_CPU_PHILOX_H

#include <stdint.h>

/* One Philox4x32-10 block: out = philox(ctr, key), ten rounds. */
void kn__philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* ctr += n as one 128-bit little-endian-word integer. */
void kn__philox_skip(uint32_t ctr[4], uint64_t n);
/* TensorFlow's seed scrambling (StatelessRandomGetKeyCounter, Philox): the
 * seed pair becomes a 64-bit key and a 128-bit counter (two uint64 words). */
void kn__philox_key_counter(uint64_t seed0, uint64_t seed1, uint64_t *key, uint64_t counter[2]);
/* TensorFlow's float of a word: 23 mantissa bits under exponent 0, minus 1
 * (in [0, 1)); the double of two words uses 20 + 32 mantissa bits. */
float kn__philox_u32_to_float(uint32_t x);
double kn__philox_u64_to_double(uint32_t hi, uint32_t lo);

#endif /* KN_CPU_PHILOX_H */
