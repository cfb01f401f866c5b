package toolfleetcli

import (
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
)

// Every documented flag of the all-in-one programs reads the same as the docs spell it
// (-model x) and as every cobra command takes it (--model x, --model=x, -model=x);
// without it its variable is the default, and given it wins over the variable.
func TestProgramFlagsOneStyle(t *testing.T) {
	opstest.Env(t, nil)
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	prices, envPrices := file("prices.yaml", "models:\n  scripted/a: {inputPerMTok: 1, outputPerMTok: 2}\n"),
		file("env-prices.yaml", "models:\n  scripted/b: {inputPerMTok: 1, outputPerMTok: 2}\n")
	tools, envTools := file("tools.yaml", "tools: []\n"), file("env-tools.yaml", "tools: []\n")
	for _, tc := range []struct {
		program, flag, value string // value "": a bool flag, given alone
		extra                string // another flag the program needs with this one
		env, envValue        string // the flag's variable, if any, and a value of it
		get                  func(Command) string
		want, envWant        string
	}{
		{"demo", "calls", "7", "", "", "", func(c Command) string { return strconv.Itoa(c.Demo.Calls) }, "7", ""},
		{"demo", "data", dir, "", "", "", func(c Command) string { return c.Demo.Fleet.DataDir }, dir, ""},
		{"demo", "http-allow", "a.example,b.example", "", "", "", func(c Command) string { return strings.Join(c.Demo.Fleet.HTTPAllowlist, ",") }, "a.example,b.example", ""},
		{"demo", "v", "", "", "", "", func(c Command) string { return c.Demo.Fleet.Log.GetLevel().String() }, "warn", ""},
		{"dev", "host", "0.0.0.0", "", "TOOLFLEET_DEV_HOST", "10.0.0.1", func(c Command) string { return c.Dev.Host }, "0.0.0.0", "10.0.0.1"},
		{"dev", "http", "127.0.0.1:0", "", "", "", func(c Command) string { return c.Dev.HTTPAddr }, "127.0.0.1:0", ""},
		{"dev", "nats-port", "4333", "", "", "", func(c Command) string { return strconv.Itoa(c.Dev.Fleet.NATSPort) }, "4333", ""},
		{"dev", "ops-addr", ":9393", "", "TOOLFLEET_OPS_ADDR", ":9494", func(c Command) string { return c.Dev.OpsAddr }, ":9393", ":9494"},
		{"dev", "log-level", "debug", "", "TOOLFLEET_LOG_LEVEL", "warn", func(c Command) string { return c.Dev.Fleet.Log.GetLevel().String() }, "debug", "warn"},
		{"dev", "model", "scripted/echo", "", "TOOLFLEET_MODEL", "scripted/demo", func(c Command) string { return c.Dev.Fleet.Model }, "scripted/echo", "scripted/demo"},
		{"dev", "prices", prices, "", "TOOLFLEET_PRICES_FILE", envPrices, func(c Command) string {
			return strings.Join(slices.Sorted(maps.Keys(c.Dev.Fleet.Prices.Models)), ",")
		}, "scripted/a", "scripted/b"},
		{"dev", "tools-file", tools, "", "TOOLFLEET_TOOLS_FILE", envTools, func(c Command) string { return c.Dev.Fleet.ToolsFile }, tools, envTools},
		{"dev", "operator-roles", "ops,oncall", "", "TOOLFLEET_OPERATOR_ROLES", "admin", func(c Command) string { return strings.Join(c.Dev.Fleet.OperatorRoles, ",") }, "ops,oncall", "admin"},
		{"dev", "data", dir, "", "", "", func(c Command) string { return c.Dev.Fleet.DataDir }, dir, ""},
		{"dev", "http-allow", "a.example", "", "", "", func(c Command) string { return strings.Join(c.Dev.Fleet.HTTPAllowlist, ",") }, "a.example", ""},
		{"mcp", "nats-url", "nats://127.0.0.1:4999", "", "TOOLFLEET_NATS_URL", "nats://127.0.0.1:4888", func(c Command) string { return c.MCP.NATS.URL }, "nats://127.0.0.1:4999", "nats://127.0.0.1:4888"},
		{"mcp", "tenant", "acme", "--role=admin", "TOOLFLEET_MCP_TENANT", "other", func(c Command) string { return c.MCP.Caller.Tenant }, "acme", "other"},
		{"mcp", "role", "admin", "-tenant=acme", "TOOLFLEET_MCP_ROLE", "viewer", func(c Command) string { return c.MCP.Caller.Role }, "admin", "viewer"},
		{"mcp", "log-level", "debug", "", "TOOLFLEET_LOG_LEVEL", "error", func(c Command) string { return c.MCP.Log.GetLevel().String() }, "debug", "error"},
		{"mcp", "nats-user", "exec", "", "TOOLFLEET_NATS_USER", "other", func(c Command) string { return c.MCP.NATS.User }, "exec", "other"},
	} {
		t.Run(tc.program+" -"+tc.flag, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(tc.env, tc.envValue)
			}
			var extra []string
			if tc.extra != "" {
				extra = []string{tc.extra}
			}
			forms := [][]string{{"-" + tc.flag, tc.value}, {"--" + tc.flag, tc.value}, {"--" + tc.flag + "=" + tc.value}, {"-" + tc.flag + "=" + tc.value}}
			if tc.value == "" {
				forms = [][]string{{"-" + tc.flag}, {"--" + tc.flag}, {"--" + tc.flag + "=true"}}
			}
			for _, form := range forms {
				c, err := Parse(slices.Concat([]string{tc.program}, form, extra), io.Discard)
				if got := ""; err != nil || tc.get(c) != tc.want {
					if err == nil {
						got = tc.get(c)
					}
					t.Errorf("%s %q: %q, %v; want %q", tc.program, form, got, err, tc.want)
				}
			}
			if tc.env == "" {
				return
			}
			c, err := Parse(slices.Concat([]string{tc.program}, extra), io.Discard)
			if err != nil || tc.get(c) != tc.envWant {
				t.Errorf("%s with %s=%s: %+v, %v; want %q", tc.program, tc.env, tc.envValue, c, err, tc.envWant)
			}
		})
	}
}

// The client commands take a long flag with one dash too (-tools a,b), as the programs
// and the docs do: here each reaches for the address its -api-url or -nats-url gave,
// where nothing answers, instead of failing on pflag's "unknown shorthand flag".
func TestClientFlagsOneStyle(t *testing.T) {
	opstest.Env(t, map[string]string{"XDG_CONFIG_HOME": t.TempDir(), "HOME": t.TempDir()})
	api, nats := opstest.FreeAddr(t), opstest.FreeAddr(t)
	for _, args := range [][]string{
		{"run", "What is 6*7?", "-tools", "calculator,get_time", "-max-steps", "3", "-api-url", "http://" + api},
		{"runs", "ls", "-status", "done", "-limit=5", "-api-url=http://" + api},
		{"approvals", "ls", "-status", "all", "-o", "json", "-api-url", "http://" + api},
		{"tools", "ls", "--api-url", "http://" + api},
		{"call", "calculator", `{"expression":"6*7"}`, "-timeout", "2s", "-nats-url", "nats://" + nats},
	} {
		r := toolfleet(args...)
		if r.code != exitFailure || !strings.Contains(r.stderr, api) && !strings.Contains(r.stderr, nats) {
			t.Errorf("toolfleet %q: exit %d, want 1 for nothing at the address given:\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
}

// Help lists each program's own flags, shell completion completes them and their values,
// and the client commands' flags, which a program would ignore, are refused.
func TestProgramHelpAndCompletion(t *testing.T) {
	opstest.Env(t, nil)
	r := toolfleet("dev", "-h")
	r.check(t, 0, "--model", "--tools-file", "--operator-roles roles", "--ops-addr address", "TOOLFLEET_MODEL")
	if strings.Contains(r.stdout, "--api-url") {
		t.Errorf("dev -h lists the client commands' flags:\n%s", r.stdout)
	}
	toolfleet("help", "mcp").check(t, 0, "--nats-url", "--tenant", "--role")
	toolfleet("__complete", "dev", "--mo").check(t, 0, "--model\t")
	toolfleet("__complete", "dev", "-model", "x", "-log-level", "").check(t, 0, "debug\n", "info\n", "warn\n", "error\n")
	toolfleet("__complete", "mcp", "--te").check(t, 0, "--tenant\t")
	toolfleet("__complete", "demo", "--").check(t, 0, "--calls\t", "--v\t")
	toolfleet("dev", "-token", "s3cret").check(t, 2, "toolfleet dev takes no --token")
}

// longFlags gives two dashes to the long flags given with one, and to nothing else.
func TestLongFlags(t *testing.T) {
	root := newRoot(io.Discard, io.Discard)
	for _, tc := range []struct{ args, want string }{
		{"dev -model x -nats-port=4333 -v", "dev --model x --nats-port=4333 -v"},
		{"demo -v -calls 5 -help", "demo -v --calls 5 --help"},
		{"run hi -tools a,b -o json -q", "run hi --tools a,b -o json -q"},
		{"run hi -system -tools -ojson", "run hi --system -tools -ojson"}, // a value stays as it is
		{"runs ls -q -status -limit 5", "runs ls -q -status --limit 5"},   // -q TEXT here
		{"-api-url http://x runs ls -o=json", "--api-url http://x runs ls -o=json"},
		{"call t {} -- -timeout", "call t {} -- -timeout"},
		{"dev -bogus", "dev --bogus"}, // cobra then says "unknown flag: --bogus"
		{"__complete dev -log-level -mo", "__complete dev --log-level -mo"},
	} {
		if got := strings.Join(longFlags(root, strings.Fields(tc.args)), " "); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.args, got, tc.want)
		}
	}
}
