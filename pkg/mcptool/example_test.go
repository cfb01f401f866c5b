package mcptool_test

import (
	"context"
	"fmt"
	"log"

	"github.com/toolfleet/toolfleet/internal/testsupport/mcptooltest"
	"github.com/toolfleet/toolfleet/pkg/mcptool"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// An MCP server's tools in a registry, beside native ones; an executor serving reg serves
// them too. Here the server runs in-process; mcptool.Command(func() *exec.Cmd {...})
// starts a stdio server and mcptool.HTTP(url, client) reaches a streamable HTTP one.
func ExampleStart() {
	server, _ := mcptooltest.NewServer(func() {})
	reg := tools.NewRegistry()
	ctx := context.Background()
	s, err := mcptool.Start(ctx, reg, mcptool.Config{
		Name:      "demo",
		Transport: mcptooltest.InMemory(server, nil),
		Policy: mcptool.Policy{
			Include: []string{"add", "echo"},
			Tools:   map[string]mcptool.Override{"add": {Safe: new(true), Idempotent: new(true)}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for _, d := range reg.Definitions() {
		fmt.Printf("%s safe=%v idempotent=%v\n", d.Name, d.Safe, d.IsIdempotent())
	}
	call, err := reg.Hydrate("demo_add", []byte(`{"a":2,"b":40}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(call.Run(ctx).Output))
	_, err = reg.Hydrate("demo_add", []byte(`{"a":"two"}`))
	fmt.Println(err != nil)
	// Output:
	// demo_add safe=true idempotent=true
	// demo_echo safe=false idempotent=false
	// {"sum":42}
	// true
}
