//go:build !linux

package pick_test

import "time"

// threadCPU is unavailable here: the CPU-time percentiles read 0.
func threadCPU() time.Duration { return 0 }
