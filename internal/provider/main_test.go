package provider_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: a stream still
// read, a retry still waiting.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
