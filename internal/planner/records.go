package planner

import (
	"github.com/toolfleet/toolfleet/internal/planner/budget"
	"github.com/toolfleet/toolfleet/internal/planner/runrec"
)

// A run's record — its control state, calls, limits and what it used — is package
// runrec's, which the planner's parts share. These are the names the planner's users
// see in its methods and requests.
type (
	Run                = runrec.Run
	RunView            = runrec.RunView
	Status             = runrec.Status
	Termination        = runrec.Termination
	CallRecord         = runrec.CallRecord
	CallStatus         = runrec.CallStatus
	StepTools          = runrec.StepTools
	Limits             = runrec.Limits
	StopCondition      = runrec.StopCondition
	ToolsChange        = runrec.ToolsChange
	PauseOptions       = runrec.PauseOptions
	PauseRequest       = runrec.PauseRequest
	MessageReplacement = runrec.MessageReplacement
	Compaction         = runrec.Compaction
	Outcome            = runrec.Outcome
)

// Statuses of a run and of a call.
const (
	StatusRunning = runrec.StatusRunning
	StatusDone    = runrec.StatusDone
	StatusPaused  = runrec.StatusPaused
	// StatusAwaitingApproval is shown, never stored (runrec.Waiting.Shown).
	StatusAwaitingApproval = runrec.StatusAwaitingApproval
	CallPending            = runrec.CallPending
	CallAwaitingApproval   = runrec.CallAwaitingApproval
)

// Outcomes: how a finished run's calls went (runrec.OutcomeOf).
const (
	OutcomeClean      = runrec.OutcomeClean
	OutcomeToolErrors = runrec.OutcomeToolErrors
	OutcomeDenied     = runrec.OutcomeDenied
)

// Terminations: why a run ended.
const (
	TerminationCompleted      = runrec.TerminationCompleted
	TerminationFinalTool      = runrec.TerminationFinalTool
	TerminationMaxSteps       = runrec.TerminationMaxSteps
	TerminationTimeout        = runrec.TerminationTimeout
	TerminationTokenBudget    = runrec.TerminationTokenBudget
	TerminationCostBudget     = runrec.TerminationCostBudget
	TerminationErrorThreshold = runrec.TerminationErrorThreshold
	TerminationLoopDetected   = runrec.TerminationLoopDetected
	TerminationModelError     = runrec.TerminationModelError
	TerminationCanceled       = runrec.TerminationCanceled
	TerminationToolRequired   = runrec.TerminationToolRequired
	TerminationStorageError   = runrec.TerminationStorageError
	TerminationStopCondition  = runrec.TerminationStopCondition
	TerminationStopHook       = runrec.TerminationStopHook
)

// Prices are package budget's: the planner's Config takes them.
type (
	PriceTable = budget.PriceTable
	ModelPrice = budget.ModelPrice
)

// LoadPrices reads a price table from a YAML or JSON file ([budget.LoadPrices]).
func LoadPrices(path string) (PriceTable, error) { return budget.LoadPrices(path) }
