package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// Tool is a typed tool: a struct whose fields are the tool's arguments (decoded from the
// validated arguments by their json tags) and whose Run executes it. Definition is called
// once, on a zero value, when the tool is registered; Run is called on a fresh value per
// call. Register a Tool with [Add] or [MustAdd].
type Tool interface {
	Definition() Definition
	Run(ctx context.Context) (any, error)
}

// Optional hooks a typed tool may implement, on its pointer receiver. They are found once,
// at registration, and feed the same pipeline as [WithCallbacks] (see [Callbacks] for the
// order); they run on the call's own value, so they can see its arguments. A callback
// given with WithCallbacks takes precedence over the method of the same kind.
type (
	// BeforeCaller is the beforeCall hook: a non-nil answer becomes the output and the
	// tool does not run.
	BeforeCaller interface {
		BeforeCall(ctx context.Context, input json.RawMessage) (any, error)
	}
	// SuccessHandler is the onSuccess hook: a non-nil answer replaces the output.
	SuccessHandler interface {
		OnSuccess(ctx context.Context, input json.RawMessage, output any) (any, error)
	}
	// ErrorHandler is the onError hook: a non-nil answer replaces the error output.
	ErrorHandler interface {
		OnError(ctx context.Context, input json.RawMessage, errOut ErrorOutput) (any, error)
	}
	// OutputFormatter is the formatOutput hook, applied last to every output.
	OutputFormatter interface {
		FormatOutput(ctx context.Context, output any) (any, error)
	}
)

// Add registers the typed tool T: its definition comes from (*T).Definition on a zero
// value, and every call decodes its validated arguments into a fresh *T. When the
// definition has no Parameters and does not opt out with AllowNoSchema, a schema is
// derived from T's fields (see [SchemaFor]). Registering a name again replaces the tool.
// A definition that cannot be registered is an *Error with [CodeInvalidDefinition].
func Add[T any, PT interface {
	*T
	Tool
}](r *Registry, opts ...Option) error {
	return add[T, PT](r, nil, opts)
}

// AddWith is [Add] for a typed tool that needs dependencies (a database handle, an HTTP
// client): newTool makes the value each call starts from, with its dependencies set, and
// the call's validated arguments are decoded into it. Keep dependencies in fields the
// arguments cannot reach, unexported or tagged `json:"-"`; an argument field that
// newTool sets and a call leaves out keeps newTool's value, as with encoding/json.
// newTool is called once per call, so share what is costly to make by capturing it:
//
//	client := &http.Client{Timeout: 5 * time.Second}
//	tools.MustAddWith(reg, func() GetWeather { return GetWeather{http: client} })
//
// The definition still comes from a zero T.
func AddWith[T any, PT interface {
	*T
	Tool
}](r *Registry, newTool func() T, opts ...Option) error {
	if newTool == nil {
		var zero T
		return Errorf(CodeInvalidDefinition, "tool %q: the constructor is nil", PT(&zero).Definition().Name)
	}
	return add[T, PT](r, newTool, opts)
}

func add[T any, PT interface {
	*T
	Tool
}](r *Registry, newTool func() T, opts []Option) error {
	var zero T
	def := PT(&zero).Definition()
	if len(def.Parameters) == 0 && !def.AllowNoSchema {
		sch, err := SchemaFor[T]()
		if err != nil {
			return Wrap(CodeInvalidDefinition, err, fmt.Sprintf("tool %q has no parameters and none can be derived from %T: %v", def.Name, zero, err))
		}
		def.Parameters = sch
	}
	var probe any = PT(new(T))
	im := &typedImpl[T, PT]{decode: decoderFor(reflect.TypeFor[T]()), newTool: newTool}
	_, im.before = probe.(BeforeCaller)
	_, im.success = probe.(SuccessHandler)
	_, im.failure = probe.(ErrorHandler)
	_, im.format = probe.(OutputFormatter)
	e, err := newEntry(def, im, opts)
	if err != nil {
		return err
	}
	r.put(e)
	return nil
}

// MustAdd is [Add] that panics when the tool cannot be registered, for start-up code
// where a broken definition is a programming error.
func MustAdd[T any, PT interface {
	*T
	Tool
}](r *Registry, opts ...Option) {
	if err := Add[T, PT](r, opts...); err != nil {
		panic(err)
	}
}

// MustAddWith is [AddWith] that panics when the tool cannot be registered.
func MustAddWith[T any, PT interface {
	*T
	Tool
}](r *Registry, newTool func() T, opts ...Option) {
	if err := AddWith[T, PT](r, newTool, opts...); err != nil {
		panic(err)
	}
}

// typedImpl instantiates and runs a typed tool.
type typedImpl[T any, PT interface {
	*T
	Tool
}] struct {
	decode                           decodeFunc // nil: decode the bytes with encoding/json
	newTool                          func() T   // nil: start from a zero T
	before, success, failure, format bool
}

// fresh returns the value a call starts from.
func (t *typedImpl[T, PT]) fresh() PT {
	p := PT(new(T))
	if t.newTool != nil {
		*p = t.newTool()
	}
	return p
}

func (t *typedImpl[T, PT]) prepare(c *Call, value map[string]any) error {
	p := t.fresh()
	if t.decode != nil {
		err := t.decode(reflect.ValueOf(p).Elem(), value)
		if errors.Is(err, errNeedsBytes) {
			p = t.fresh()
			err = json.Unmarshal(c.args, p)
		}
		if err != nil {
			return err
		}
	} else if err := json.Unmarshal(c.args, p); err != nil {
		return err
	}
	c.tool = p
	return nil
}

func (t *typedImpl[T, PT]) run(ctx context.Context, c *Call) (any, error) {
	return c.tool.Run(ctx)
}

func (t *typedImpl[T, PT]) hooks(c *Call) Callbacks {
	var cb Callbacks
	if t.before {
		cb.BeforeCall = c.tool.(BeforeCaller).BeforeCall
	}
	if t.success {
		cb.OnSuccess = c.tool.(SuccessHandler).OnSuccess
	}
	if t.failure {
		cb.OnError = c.tool.(ErrorHandler).OnError
	}
	if t.format {
		cb.FormatOutput = c.tool.(OutputFormatter).FormatOutput
	}
	return cb
}

// Func is a plain function tool: it receives the validated arguments as a JSON object.
type Func func(ctx context.Context, args json.RawMessage) (any, error)

// AddFunc registers fn under def. Registering a name again replaces the tool. A
// definition that cannot be registered is an *Error with [CodeInvalidDefinition].
func (r *Registry) AddFunc(def Definition, fn Func, opts ...Option) error {
	if fn == nil {
		return Errorf(CodeInvalidDefinition, "tool %q: the function is nil", def.Name)
	}
	e, err := newEntry(def, funcImpl(fn), opts)
	if err != nil {
		return err
	}
	r.put(e)
	return nil
}

type funcImpl Func

func (funcImpl) prepare(*Call, map[string]any) error { return nil }

func (f funcImpl) run(ctx context.Context, c *Call) (any, error) { return f(ctx, c.args) }

func (funcImpl) hooks(*Call) Callbacks { return Callbacks{} }
