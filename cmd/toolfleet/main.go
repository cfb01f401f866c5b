// Command toolfleet runs the whole fleet in one process, on an embedded JetStream:
//
//	toolfleet demo [-calls N] [-data DIR]   an agent run and a load, then a summary
//	toolfleet dev  [-host ADDR] [-http ADDR] [-nats-port N] [-ops-addr ADDR] [-data DIR]
//	                                        the fleet, its HTTP API and ops server until Ctrl-C
//	toolfleet mcp [-nats-url URL] [-tenant T -role R]
//	                                        the MCP edge over stdio, on a fleet reached over NATS
//	toolfleet health [-ops-addr ADDR]       exit 0 when the ops server beside it is ready
//
// and drives a fleet (docs/cli.md): toolfleet run, runs, approvals, tools, call,
// version, completion.
//
// demo and dev take -http-allow HOSTS (the hosts http_get may reach; none by default);
// demo takes -v (the parts' warnings on stderr), dev -log-level (TOOLFLEET_LOG_LEVEL,
// info). dev binds -host (TOOLFLEET_DEV_HOST, 127.0.0.1) and protects its API with
// TOOLFLEET_API_TOKEN when set; it takes the planner's -prices FILE and -operator-roles
// ROLES, the executor's -tools-file FILE (served beside the built-ins) and -model SPEC
// (TOOLFLEET_MODEL). health works for any part of the shared image: every part
// reads TOOLFLEET_OPS_ADDR.
//
// With TOOLFLEET_MODEL set (e.g. ollama/llama3.1, or openai/gpt-4o-mini with
// OPENAI_API_KEY), runs use that model; otherwise an offline scripted model.
package main

import (
	"os"

	"github.com/toolfleet/toolfleet/cmd/toolfleet/toolfleetcli"
	"github.com/toolfleet/toolfleet/pkg/sandbox"
)

func main() {
	// First: in a sandbox launcher (a command tool started in its Landlock sandbox)
	// this confines the process and execs the tool, and never returns.
	sandbox.Init()
	os.Exit(toolfleetcli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
