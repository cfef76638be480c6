/* splitmix64 (Steele, Lea, Flood 2014), named once: a bijection of 64-bit words whose output at a
 * counter depends on nothing else, so initialization by element index, the data order and the
 * dropout masks do not depend on threads or meshes. */
#ifndef MINIDC_SPLITMIX_H
#define MINIDC_SPLITMIX_H

#include <stdint.h>

#define MDC_GOLDEN64 0x9E3779B97F4A7C15ull /* 2^64 / the golden ratio: the generator's step */

/* The finalizer: mixes a word (the output of the generator whose state is z). */
static inline uint64_t mdc_mix64_finalize(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* The generator's output after the state x (one step from x). */
static inline uint64_t mdc_splitmix64(uint64_t x) { return mdc_mix64_finalize(x + MDC_GOLDEN64); }

#endif
