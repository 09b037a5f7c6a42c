#pragma once

// Defaults of the generated data sets, shared by the scheduler (which writes them into a
// study's spec) and the workers (which generate the rows).

namespace dhpt {

inline constexpr int kDefaultSensorChannels = 32;
inline constexpr int kDefaultSensorLatent = 4;
inline constexpr double kDefaultSensorNoise = 0.1;

}  // namespace dhpt
