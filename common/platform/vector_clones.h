// SHARDLINE_TARGET_CLONES(targets...): a function compiled once for each
// target ("avx2", "avx512f", ..., and "default": the baseline), the copy
// picked at load time by the CPU (GCC's target_clones, an ifunc).
//
// Contract: only for code whose copies compute the same operations in the
// same order, so that every copy gives the same bits (no floating-point
// contraction: -ffp-contract=off; no reordered sums).
//
// Built only where it is safe: GCC on x86-64, and not under ThreadSanitizer,
// which instruments the ifunc resolver that runs while the program is
// relocated, before its runtime is up (a crash at start). Not with clang:
// clang 14's resolver (the sanitizer and fuzzer build's) picked an AVX-512
// copy on a CPU without AVX-512 (an illegal instruction). Elsewhere the
// baseline copy only.
#ifndef SHARDLINE_COMMON_PLATFORM_VECTOR_CLONES_H_
#define SHARDLINE_COMMON_PLATFORM_VECTOR_CLONES_H_

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define SHARDLINE_TARGET_CLONES(...) __attribute__((target_clones(__VA_ARGS__)))
#else
#define SHARDLINE_TARGET_CLONES(...)
#endif

#endif  // SHARDLINE_COMMON_PLATFORM_VECTOR_CLONES_H_
