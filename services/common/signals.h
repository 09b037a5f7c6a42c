#pragma once

// Graceful shutdown for the service binaries: block SIGINT/SIGTERM in every thread (call
// before starting any), then wait for one on the main thread.

namespace dhpt {

void BlockTerminationSignals();
// Returns the signal received (SIGINT or SIGTERM).
int WaitForTerminationSignal();

}  // namespace dhpt
