// Package tools defines what an agent may call: canonical tool definitions, a registry
// that fails closed, JSON Schema validation compiled once per tool, hydration of a
// model's raw arguments into typed values, the callbacks around a run, composite tools,
// and translation to and from the model providers' tool formats.
//
// # Definitions
//
// A [Definition] is the contract of a tool. Its Parameters are a JSON Schema kept byte for
// byte; a tool without one is refused unless it opts in with AllowNoSchema and a
// [NoSchemaMode], and its calls then report validated:false everywhere.
//
// # Errors
//
// Every failure is an [*Error] with a [Code]. Match codes with errors.Is against the
// sentinels ([ErrInvalidInput], [ErrNoSuchTool], ...). Codes decide retries: see
// [Code.Retryable] and [RetryPolicy].
package tools
