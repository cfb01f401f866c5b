package builtin_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolfleet/toolfleet/pkg/builtin"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

func ExampleRegister() {
	reg := tools.NewRegistry()
	// No sandbox and no allowlist: the file tools and http_get are left out.
	if err := builtin.Register(reg, builtin.Config{}); err != nil {
		panic(err)
	}
	call, err := reg.Hydrate("calculator", []byte(`{"expression": "2 ^ 10 / (3 + 1)"}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(call.Run(context.Background()).Output))

	call, _ = reg.Hydrate("calculator", []byte(`{"expression": "1 / 0"}`))
	out := call.Run(context.Background())
	fmt.Println(out.Err.Code, out.Err.Code.Retryable())

	_, err = reg.Hydrate("read_file", []byte(`{"path": "notes.txt"}`))
	fmt.Println(errors.Is(err, tools.ErrNoSuchTool))
	// Output:
	// {"expression":"2 ^ 10 / (3 + 1)","result":256}
	// tool_error_permanent false
	// true
}
