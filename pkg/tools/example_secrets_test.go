package tools_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// A tool reads its declared secret from the context the executor gives it; what it
// returns is scrubbed of the value before anything is stored, and its definition
// marshals the secret's name only.
func ExampleMustSecret() {
	def := tools.Definition{Name: "whoami", Secrets: []tools.Secret{{Name: "API_KEY", Env: "MY_API_KEY"}}}
	run := func(ctx context.Context) string { return "called with key " + tools.MustSecret(ctx, "API_KEY") }

	secrets := tools.Secrets{"API_KEY": "k-0123456789"} // what the executor resolved at start-up
	out := run(tools.WithSecrets(context.Background(), secrets))
	fmt.Println(secrets.ScrubString(out))

	b, _ := json.Marshal(def.Secrets)
	fmt.Println(string(b))
	// Output:
	// called with key [redacted:API_KEY]
	// [{"name":"API_KEY"}]
}
