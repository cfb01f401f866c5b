package provider_test

import (
	"context"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

func TestEchoCallsTheToolsTheMessageNames(t *testing.T) {
	m, err := provider.New("scripted/echo")
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "scripted/echo" {
		t.Fatalf("name %q", m.Name())
	}
	offered := []tools.Definition{{Name: "calculator"}, {Name: "get_time"}, {Name: "calculator_pro"}}
	ask := func(msgs []provider.Message) *provider.Response {
		t.Helper()
		resp, err := m.Generate(context.Background(), provider.Request{Messages: msgs, Tools: offered})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Provider != "scripted" {
			t.Fatalf("an offline answer must say so, provider %q", resp.Provider)
		}
		return resp
	}
	msgs := []provider.Message{{Role: provider.RoleUser,
		Text: `first get_time, then calculator {"expression": "6*7"} please`}}
	resp := ask(msgs)
	calls := resp.Message.ToolCalls
	if len(calls) != 2 || calls[0].Name != "get_time" || calls[1].Name != "calculator" {
		t.Fatalf("calls %+v, want get_time then calculator", calls)
	}
	if string(calls[0].Arguments) != `{}` || string(calls[1].Arguments) != `{"expression":"6*7"}` {
		t.Fatalf("arguments %s and %s", calls[0].Arguments, calls[1].Arguments)
	}
	if resp.StopReason != provider.StopToolCalls {
		t.Fatalf("stop reason %q", resp.StopReason)
	}
	again := ask(msgs)
	if again.Message.ToolCalls[1].ID != calls[1].ID {
		t.Fatal("the same request must get the same call ids (any replica, after a restart)")
	}

	msgs = append(msgs, resp.Message, provider.Message{Role: provider.RoleTool, ToolResults: []provider.ToolResult{
		{CallID: calls[0].ID, Name: "get_time", Content: []byte(`"12:00"`)},
		{CallID: calls[1].ID, Name: "calculator", Content: []byte(`{"error":{"code":"tool_error"}}`), IsError: true},
	}})
	answer := ask(msgs)
	if len(answer.Message.ToolCalls) != 0 || answer.Message.Text != "get_time result: 12:00\ncalculator error: {\"error\":{\"code\":\"tool_error\"}}" {
		t.Fatalf("answer %+v", answer.Message)
	}

	// A follow-up naming no tool (calculator_pro is another tool's name; "calculator"
	// inside it is not a mention) is echoed with the names it could use.
	msgs = append(msgs, answer.Message, provider.Message{Role: provider.RoleUser, Text: "thanks"})
	echo := ask(msgs)
	if len(echo.Message.ToolCalls) != 0 || !strings.HasPrefix(echo.Message.Text, "echo: thanks") ||
		!strings.Contains(echo.Message.Text, "calculator, calculator_pro, get_time") {
		t.Fatalf("echo %+v", echo.Message)
	}
	msgs = append(msgs, echo.Message, provider.Message{Role: provider.RoleUser, Text: "calculator_pro {not json"})
	pro := ask(msgs)
	if len(pro.Message.ToolCalls) != 1 || pro.Message.ToolCalls[0].Name != "calculator_pro" ||
		string(pro.Message.ToolCalls[0].Arguments) != `{}` {
		t.Fatalf("calls %+v: want calculator_pro alone, with {} for arguments that are not JSON", pro.Message.ToolCalls)
	}
}
