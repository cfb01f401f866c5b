package jsutil_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: a watch, a
// catalog refresh, a client or server not stopped.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
