//go:build race

package plannerapi

// raceDetector is true when the tests run under the race detector, which slows a step
// several times: tests bound by a run's short time limit skip there.
const raceDetector = true
