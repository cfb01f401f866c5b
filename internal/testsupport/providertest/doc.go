// Package providertest is the conformance suite every model client passes: [Run] starts
// an httptest server that answers with a provider's exact wire format (fixtures written
// from the provider's API reference) and checks both sides of the exchange — what the
// client sends (path, headers, messages, tools, tool choice, tool results) and what it
// makes of the answers (text, tool calls, usage, stop reasons, streams, errors, retries,
// cancellation).
//
// A client's test supplies a [Harness]: how to build the client, how its provider's
// requests decode into the neutral [Sent] view, and the provider's response bodies for
// the suite's scenarios, each encoding the Want values of this package:
//
//	func TestConformance(t *testing.T) {
//		providertest.Run(t, providertest.Harness{
//			Name: "openai", Path: "/chat/completions",
//			New:  func(url string, opts ...provider.Option) (provider.Model, error) {
//				return provider.NewOpenAI(providertest.WantModel, append(opts, provider.WithBaseURL(url))...)
//			},
//			...
//		})
//	}
package providertest
