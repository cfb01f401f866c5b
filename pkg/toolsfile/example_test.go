package toolsfile_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolfleet/toolfleet/pkg/tools"
	"github.com/toolfleet/toolfleet/pkg/toolsfile"
)

func ExampleLoad() {
	dir, _ := os.MkdirTemp("", "toolsfile-example")
	defer os.RemoveAll(dir)
	// A tool in shell: it reads its JSON arguments on stdin and prints its JSON result.
	_ = os.WriteFile(filepath.Join(dir, "shout.sh"), []byte("#!/bin/sh\nread args\nprintf '{\"heard\":%s}' \"$args\"\n"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, "tools.yaml"), []byte(`
tools:
  - name: shout
    description: Repeat the arguments back.
    safe: true
    parameters:
      type: object
      properties: {text: {type: string}}
      required: [text]
      additionalProperties: false
    command:
      argv: [./shout.sh]
      timeout: 5s
`), 0o644)

	specs, err := toolsfile.Load(filepath.Join(dir, "tools.yaml"))
	if err != nil {
		panic(err)
	}
	reg := tools.NewRegistry()
	if err := toolsfile.Register(reg, specs); err != nil {
		panic(err)
	}
	call, err := reg.Hydrate("shout", []byte(`{"text":"hello"}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(call.Run(context.Background()).Output))
	// Output: {"heard":{"text":"hello"}}
}
