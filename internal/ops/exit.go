package ops

import "errors"

// The exit codes of every program.
const (
	ExitOK      = 0 // a clean stop, -h, help, version
	ExitFailure = 1 // the program failed while running (NATS gone for good, a port taken, ...)
	ExitConfig  = 2 // a bad configuration: a flag, a variable, a missing key, secret or file
)

// ErrConfig matches (errors.Is) every configuration error: [Main] exits [ExitConfig]
// for them, whether parse found them or run did (a model's missing API key, a tools
// file's missing secret are found when the part starts).
var ErrConfig = errors.New("bad configuration")

// ConfigError marks err as a configuration error; its message is err's. Nil stays nil.
func ConfigError(err error) error {
	if err == nil {
		return nil
	}
	return configError{err}
}

type configError struct{ err error }

func (e configError) Error() string        { return e.err.Error() }
func (e configError) Unwrap() error        { return e.err }
func (e configError) Is(target error) bool { return target == ErrConfig }
