package jsutil

import "time"

// SetSetupTryTimeout sets how long one try of RetrySetup (and Watch) may take, for a
// test that loses requests on purpose; it returns the restore.
func SetSetupTryTimeout(d time.Duration) (restore func()) {
	old := setupTryTimeout
	setupTryTimeout = d
	return func() { setupTryTimeout = old }
}
