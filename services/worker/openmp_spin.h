#pragma once

// XGBoost and the Random Forest train with OpenMP threads, which by libgomp's default spin for
// about 300,000 iterations at each barrier before they sleep. On a board whose cores are also
// busy with something else (another pod, a second worker, a build), a spinning thread burns
// the time slice the thread it waits for needs: a two-trial README study that takes 7 s on an
// idle machine took over 120 s beside 16 busy processes, 35 s with a spin of 10,000 and 13 s
// with no spin (OMP_WAIT_POLICY=passive, which however doubles the idle machine's 7 s).
// libgomp reads its settings when it is loaded, before main, so the worker sets the spin count
// and executes itself again; an operator's own OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept.

namespace dhpt::worker {

// The spin count a worker's OpenMP threads get unless the environment sets one.
inline constexpr char kDefaultGompSpinCount[] = "10000";

// When neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set: sets GOMP_SPINCOUNT to the default and
// re-executes the running binary with the same arguments (the same process id). Returns when
// there is nothing to do, or when the exec failed (the worker then runs with libgomp's default,
// only slower on a busy machine). Call first in main, before any thread starts.
void ReexecWithBoundedOpenMpSpin(char** argv);

}  // namespace dhpt::worker
