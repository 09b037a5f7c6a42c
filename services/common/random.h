#pragma once

// Deterministic randomness that is the same on every platform: std::mt19937_64 is specified
// bit for bit, while the standard distributions are not, so values are derived by hand.

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

namespace dhpt {

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A generator seeded from (seed, stream, index): the n-th draw of a stream does not depend on
// how many generators ran before it.
inline std::mt19937_64 SeededGenerator(uint64_t seed, uint64_t stream, uint64_t index) {
  return std::mt19937_64(SplitMix64(SplitMix64(SplitMix64(seed) ^ stream) ^ index));
}

// Uniform in [0, 1) from 53 random bits.
inline double UniformUnit(std::mt19937_64& generator) {
  return static_cast<double>(generator() >> 11) * 0x1.0p-53;
}

// Standard normal by Box-Muller.
inline double StandardNormal(std::mt19937_64& generator) {
  const double u1 = 1.0 - UniformUnit(generator);  // (0, 1]: log stays finite.
  const double u2 = UniformUnit(generator);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// Shuffles [first, last) with Fisher-Yates; the same order on every platform.
template <typename It>
void DeterministicShuffle(It first, It last, std::mt19937_64& generator) {
  for (auto n = last - first; n > 1; --n) {
    std::swap(first[n - 1], first[generator() % static_cast<uint64_t>(n)]);
  }
}

}  // namespace dhpt
