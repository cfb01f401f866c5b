//go:build !race

package plannerapi

// raceDetector is true when the tests run under the race detector (race_on_test.go).
const raceDetector = false
