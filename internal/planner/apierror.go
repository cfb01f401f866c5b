package planner

import (
	"fmt"
	"net/http"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// APIError is an error of the planner's API, which its methods return: the HTTP API
// (package plannerapi) answers it with its status and a JSON body
// {"error":{"status","message","violations","approval","retryAfter"}} that says what is wrong, and
// the NATS control service with the same status and error in a [ControlReply].
//
// The planner decides the kind of failure (400 a bad request, 403 a caller's role, 404
// a run the caller does not see, 409 a run's state, 413 what cannot be stored, 429 a
// planner too busy to take a new run now) and says
// it as the HTTP status both answers use, rather than as a kind each maps: one
// vocabulary, kept in one place.
type APIError struct {
	Status     int               `json:"status"`
	Message    string            `json:"message"`
	Violations []tools.Violation `json:"violations,omitempty"`
	// Approval is the decision that stood, for an approval answer refused as late.
	Approval *events.Approval `json:"approval,omitempty"`
	// RetryAfter is how many seconds to wait before asking again, for a refusal that
	// passes (429: the planner is saturated); the HTTP API also sends it as Retry-After.
	RetryAfter int `json:"retryAfter,omitempty"`
}

func (e *APIError) Error() string { return e.Message }

func requestErrorf(format string, args ...any) error {
	return &APIError{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...)}
}

func forbiddenf(format string, args ...any) error {
	return &APIError{Status: http.StatusForbidden, Message: fmt.Sprintf(format, args...)}
}

func notFoundf(format string, args ...any) error {
	return &APIError{Status: http.StatusNotFound, Message: fmt.Sprintf(format, args...)}
}

func conflictf(format string, args ...any) error {
	return &APIError{Status: http.StatusConflict, Message: fmt.Sprintf(format, args...)}
}
