// Command stdioserver is the adapter tests' MCP server (package mcptooltest) over stdio.
// Its crash tool exits with code 3 during the call. With STDIOSERVER_REQUIRE=NAME it
// refuses to start without the variable NAME, and prints its value on stderr.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolfleet/toolfleet/internal/testsupport/mcptooltest"
)

func main() {
	s, _ := mcptooltest.NewServer(func() {
		fmt.Fprintln(os.Stderr, "stdioserver: crashing on purpose")
		os.Exit(3)
	})
	if v := os.Getenv("STDIOSERVER_REQUIRE"); v != "" {
		if os.Getenv(v) == "" {
			fmt.Fprintf(os.Stderr, "stdioserver: %s is not set\n", v)
			os.Exit(2)
		}
		// A careless server prints its token; toolfleet must not pass it on.
		fmt.Fprintf(os.Stderr, "stdioserver: starting with %s=%s\n", v, os.Getenv(v))
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
