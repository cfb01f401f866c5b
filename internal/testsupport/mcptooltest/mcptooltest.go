// Package mcptooltest is a small MCP server, written with the official Go SDK, that the
// tests of the MCP adapter run in-process, over streamable HTTP and, built from
// pkg/mcptool/testdata/stdioserver, over stdio. It counts the calls each tool receives,
// so that a test can tell whether a call reached the server.
package mcptooltest

import (
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Counts counts the calls each tool received.
type Counts struct {
	mu sync.Mutex
	m  map[string]int
}

// Get returns the calls tool received so far.
func (c *Counts) Get(tool string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[tool]
}

func (c *Counts) add(tool string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[tool]++
}

func (c *Counts) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}

type (
	AddIn struct {
		A int `json:"a" jsonschema:"the first addend"`
		B int `json:"b" jsonschema:"the second addend"`
	}
	AddOut struct {
		Sum int `json:"sum"`
	}
	EchoIn struct {
		Text string `json:"text"`
	}
	SleepIn struct {
		MS int `json:"ms"`
	}
	GrowIn struct {
		Name string `json:"name"`
	}
	Empty struct{}
)

// NewServer returns the test server and its counts. Its tools:
//
//	add {a, b}   structured output {sum}; annotated readOnlyHint
//	echo {text}  the text, as one text content item
//	fail {}      isError, with the text "boom"
//	picture {}   a text and an image content item
//	sleep {ms}   answers "slept" after ms milliseconds
//	crash {}     calls onCrash (the stdio server exits)
//	grow {name}  adds a tool called name (an echo), which sends tools/list_changed
//	shrink {name} removes the tool called name, which sends tools/list_changed
//	stats {}     the calls of every tool so far, {"counts": {...}} (not counted)
func NewServer(onCrash func()) (*mcp.Server, *Counts) {
	counts := &Counts{m: map[string]int{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "toolfleet-test", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two integers.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in AddIn) (*mcp.CallToolResult, AddOut, error) {
			counts.add("add")
			return nil, AddOut{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Say the text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, in EchoIn) (*mcp.CallToolResult, any, error) {
			counts.add("echo")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *mcp.CallToolRequest, Empty) (*mcp.CallToolResult, any, error) {
			counts.add("fail")
			return nil, nil, errors.New("boom")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "picture", Description: "A caption and a picture."},
		func(context.Context, *mcp.CallToolRequest, Empty) (*mcp.CallToolResult, any, error) {
			counts.add("picture")
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "a red dot"},
				&mcp.ImageContent{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleep, then answer."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in SleepIn) (*mcp.CallToolResult, any, error) {
			counts.add("sleep")
			select {
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "The server dies during the call."},
		func(context.Context, *mcp.CallToolRequest, Empty) (*mcp.CallToolResult, any, error) {
			counts.add("crash")
			onCrash()
			time.Sleep(time.Second) // the call never answers
			return nil, nil, errors.New("still alive")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "grow", Description: "Add a tool."},
		func(_ context.Context, _ *mcp.CallToolRequest, in GrowIn) (*mcp.CallToolResult, any, error) {
			counts.add("grow")
			name := in.Name
			mcp.AddTool(s, &mcp.Tool{Name: name, Description: "A tool added at run time."},
				func(_ context.Context, _ *mcp.CallToolRequest, in EchoIn) (*mcp.CallToolResult, any, error) {
					counts.add(name)
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + ": " + in.Text}}}, nil, nil
				})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added " + name}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "shrink", Description: "Remove a tool."},
		func(_ context.Context, _ *mcp.CallToolRequest, in GrowIn) (*mcp.CallToolResult, any, error) {
			counts.add("shrink")
			s.RemoveTools(in.Name)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "removed " + in.Name}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "stats", Description: "Calls so far."},
		func(context.Context, *mcp.CallToolRequest, Empty) (*mcp.CallToolResult, map[string]map[string]int, error) {
			return nil, map[string]map[string]int{"counts": counts.snapshot()}, nil
		})
	return s, counts
}

// InMemory returns a transport factory for an adapter's Config that connects s over a
// fresh in-memory pipe each time; the server sessions it made are sent on sessions
// (when not nil), so that a test can end one as a crash would.
func InMemory(s *mcp.Server, sessions chan<- *mcp.ServerSession) func(context.Context) (mcp.Transport, error) {
	return func(ctx context.Context) (mcp.Transport, error) {
		st, ct := mcp.NewInMemoryTransports()
		ss, err := s.Connect(ctx, st, nil)
		if err != nil {
			return nil, err
		}
		if sessions != nil {
			select {
			case sessions <- ss:
			default:
			}
		}
		return ct, nil
	}
}

// BuildStdioServer builds the stdio test server (testdata/stdioserver) into a temporary
// directory and returns the program's path.
func BuildStdioServer(tb testing.TB) string {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "..", "..", "pkg", "mcptool", "testdata", "stdioserver")
	bin := filepath.Join(tb.TempDir(), "stdioserver")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build the stdio MCP test server: %v\n%s", err, out)
	}
	if _, err := os.Stat(bin); err != nil {
		tb.Fatal(err)
	}
	return bin
}
