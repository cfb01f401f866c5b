package toolsfile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Callbacks are a tool's declarative callbacks: reference 00's four hooks without code.
// They become the tool's [tools.Callbacks], so they run in the same order and under the
// same rules: beforeCall first (a cache hit or a service's result short-circuits the
// tool, skipping onSuccess and onError), then onSuccess or onError, then formatOutput on
// whatever output remains. A callback that fails (its service does not answer, answers
// an error, a pointer that is not in the output) ends the call with callback_failed
// naming it, reported in the call's result like a Go callback's failure; the executor
// goes on serving.
type Callbacks struct {
	BeforeCall   *BeforeCall `json:"beforeCall,omitempty"`
	OnSuccess    *Transform  `json:"onSuccess,omitempty"`
	OnError      *Transform  `json:"onError,omitempty"`
	FormatOutput *Transform  `json:"formatOutput,omitempty"`
}

// BeforeCall is asked before the tool runs: a cache, or a NATS service.
type BeforeCall struct {
	// Cache answers a call whose key arguments were answered before, within the TTL.
	Cache *Cache `json:"cache,omitempty"`
	// Service is a NATS subject asked {"hook":"beforeCall", "input", ...}; it answers
	// {"action":"run"} to let the tool run or {"result": ...} to answer in its place.
	Service string `json:"service,omitempty"`
	// Timeout bounds the service's answer. Zero: 2 s; at most 10 s.
	Timeout tools.Duration `json:"timeout,omitempty"`
}

// Cache keeps a tool's successful outputs in a JetStream key-value bucket shared by the
// fleet: a call whose key arguments match a stored entry is answered with its output and
// the tool does not run; any other call runs and its ok output is stored for TTL. The
// output stored is the one onSuccess leaves, so a hit answers what a miss would, and
// formatOutput applies to both. Entries are per tenant: a tenant never sees another's.
// A bucket that cannot be read or written costs the call its cache, never its answer:
// the tool runs, and the executor logs why (at most once a minute per tool). After a
// failure the cache rests for 10s, so that a bucket out of reach does not add its
// timeout to every call.
type Cache struct {
	// Key lists the JSON pointers (RFC 6901) of the arguments that make up the key; an
	// absent member counts as null. Empty: the whole arguments.
	Key []string `json:"key,omitempty"`
	// TTL is how long an entry answers calls. Required.
	TTL tools.Duration `json:"ttl"`
	// Bucket is the key-value bucket; tools may share one. Empty: toolfleet-cache.
	Bucket string `json:"bucket,omitempty"`

	mu     sync.Mutex
	kvs    map[*nats.Conn]jetstream.KeyValue
	warned atomic.Int64 // when the last failure was logged (Unix ns)
	rests  atomic.Int64 // until when it is not used after a failure (Unix ns)
}

// DefaultCacheBucket is the bucket of a cache that names none.
const DefaultCacheBucket = "toolfleet-cache"

// Transform replaces an output (onSuccess), an error output (onError) or the final
// output (formatOutput). Exactly one of Service, Pointer and Template is set.
type Transform struct {
	// Service is a NATS subject asked {"hook", "input", "output"}; it answers
	// {"result": ...} to replace the output, or {"action":"keep"} to keep it.
	Service string `json:"service,omitempty"`
	// Timeout bounds the service's answer. Zero: 2 s; at most 10 s.
	Timeout tools.Duration `json:"timeout,omitempty"`
	// Pointer (RFC 6901) picks the part of the output that replaces it.
	Pointer string `json:"pointer,omitempty"`
	// Template is a Go text/template whose text replaces the output (as a JSON string).
	// It sees .output (the output, or for onError the error output
	// {"error":{"code","message"}}) and, but for formatOutput, .input (the arguments),
	// decoded from JSON; the function json writes a value as JSON. A missing key is an
	// error.
	Template string `json:"template,omitempty"`

	tmpl *template.Template
}

// Callback names, as in callback_failed messages.
const (
	hookBeforeCall   = "beforeCall"
	hookOnSuccess    = "onSuccess"
	hookOnError      = "onError"
	hookFormatOutput = "formatOutput"
)

var bucketName = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// check lists what is wrong with the callbacks and compiles their templates.
func (cb *Callbacks) check() []string {
	var p []string
	if b := cb.BeforeCall; b != nil {
		switch {
		case b.Cache == nil && b.Service == "":
			p = append(p, "callbacks.beforeCall: set cache or service")
		case b.Cache != nil && b.Service != "":
			p = append(p, "callbacks.beforeCall: set cache or service, not both")
		case b.Cache != nil:
			if b.Timeout != 0 {
				p = append(p, "callbacks.beforeCall: timeout belongs to a service, not a cache")
			}
			p = append(p, b.Cache.check()...)
		default:
			p = append(p, checkService("callbacks.beforeCall", b.Service, b.Timeout)...)
		}
	}
	for _, t := range []struct {
		name string
		t    *Transform
	}{{hookOnSuccess, cb.OnSuccess}, {hookOnError, cb.OnError}, {hookFormatOutput, cb.FormatOutput}} {
		if t.t != nil {
			p = append(p, t.t.check("callbacks."+t.name)...)
		}
	}
	return p
}

func (c *Cache) check() []string {
	var p []string
	if c.TTL <= 0 {
		p = append(p, "callbacks.beforeCall.cache: ttl is required and must be positive (\"10m\")")
	}
	if c.Bucket != "" && !bucketName.MatchString(c.Bucket) {
		p = append(p, fmt.Sprintf("callbacks.beforeCall.cache: bucket %q may hold only letters, digits, '_' and '-'", c.Bucket))
	}
	for _, k := range c.Key {
		if err := checkPointer(k); err != nil {
			p = append(p, fmt.Sprintf("callbacks.beforeCall.cache: key %q: %v", k, err))
		}
	}
	return p
}

func (t *Transform) check(field string) []string {
	set := 0
	for _, s := range []string{t.Service, t.Pointer, t.Template} {
		if s != "" {
			set++
		}
	}
	if set != 1 {
		return []string{field + ": set exactly one of service, pointer and template"}
	}
	if t.Timeout != 0 && t.Service == "" {
		return []string{field + ": timeout belongs to a service"}
	}
	switch {
	case t.Service != "":
		return checkService(field, t.Service, t.Timeout)
	case t.Pointer != "":
		if err := checkPointer(t.Pointer); err != nil {
			return []string{fmt.Sprintf("%s: pointer %q: %v", field, t.Pointer, err)}
		}
	default:
		tmpl, err := template.New(field).Option("missingkey=error").Funcs(template.FuncMap{"json": toJSON}).Parse(t.Template)
		if err != nil {
			return []string{fmt.Sprintf("%s: template: %v", field, err)}
		}
		t.tmpl = tmpl
	}
	return nil
}

// checkService applies the rules of the fleet's other hooks to a callback's service: one
// literal subject outside toolfleet.>, $> and _INBOX.>, a timeout up to 10 s.
func checkService(field, subject string, timeout tools.Duration) []string {
	if err := (events.Hook{Subject: subject, Timeout: timeout}).Check(field); err != nil {
		return []string{strings.Replace(err.Error(), ".subject", ".service", 1)}
	}
	return nil
}

func checkPointer(p string) error {
	if p == "" || p[0] != '/' {
		return errors.New("a JSON pointer starts with /")
	}
	return nil
}

func toJSON(v any) (string, error) {
	b, err := tools.MarshalJSON(v)
	return string(b), err
}

// hooks turns the declarations into the tool's callbacks.
func (cb *Callbacks) hooks(tool string) tools.Callbacks {
	var out tools.Callbacks
	var cache *Cache
	if b := cb.BeforeCall; b != nil {
		if b.Cache != nil {
			cache = b.Cache
			out.BeforeCall = func(ctx context.Context, input json.RawMessage) (any, error) {
				return cache.lookup(ctx, tool, input), nil
			}
		} else {
			service, timeout := b.Service, b.Timeout
			out.BeforeCall = func(ctx context.Context, input json.RawMessage) (any, error) {
				a, err := ask(ctx, service, timeout, serviceRequest{Hook: hookBeforeCall, Input: input})
				if err != nil {
					return nil, err
				}
				switch {
				case a.Result != nil:
					return a.Result, nil
				case a.Action == "run":
					return nil, nil
				}
				return nil, fmt.Errorf("service %s answered neither {\"action\":\"run\"} nor {\"result\":...}", service)
			}
		}
	}
	if t := cb.OnSuccess; t != nil || cache != nil {
		out.OnSuccess = func(ctx context.Context, input json.RawMessage, output any) (any, error) {
			v := output
			if t != nil {
				r, err := t.apply(ctx, hookOnSuccess, input, output)
				if err != nil {
					return nil, err
				}
				if r != nil {
					v = r
				}
			}
			if cache != nil {
				cache.store(ctx, tool, input, v)
			}
			return v, nil
		}
	}
	if t := cb.OnError; t != nil {
		out.OnError = func(ctx context.Context, input json.RawMessage, errOut tools.ErrorOutput) (any, error) {
			return t.apply(ctx, hookOnError, input, errOut)
		}
	}
	if t := cb.FormatOutput; t != nil {
		out.FormatOutput = func(ctx context.Context, output any) (any, error) {
			return t.apply(ctx, hookFormatOutput, nil, output)
		}
	}
	return out
}

// apply runs the transform on output; nil keeps it.
func (t *Transform) apply(ctx context.Context, hook string, input json.RawMessage, output any) (any, error) {
	out, err := tools.MarshalJSON(output)
	if err != nil {
		return nil, err
	}
	switch {
	case t.Service != "":
		a, err := ask(ctx, t.Service, t.Timeout, serviceRequest{Hook: hook, Input: input, Output: out})
		if err != nil {
			return nil, err
		}
		switch {
		case a.Result != nil:
			return a.Result, nil
		case a.Action == "keep":
			return nil, nil
		}
		return nil, fmt.Errorf("service %s answered neither {\"action\":\"keep\"} nor {\"result\":...}", t.Service)
	case t.Pointer != "":
		v, ok := pointAt(out, t.Pointer)
		if !ok {
			return nil, fmt.Errorf("pointer %s is not in the output", t.Pointer)
		}
		return v, nil
	}
	data := map[string]any{"output": decode(out)}
	if len(input) > 0 {
		data["input"] = decode(input)
	}
	var buf bytes.Buffer
	if err := t.tmpl.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("template: %v", err)
	}
	return buf.String(), nil
}

// decode is b's value for a template: an output or arguments, JSON already; anything
// else is nil there.
func decode(b []byte) any {
	var v any
	_ = json.Unmarshal(b, &v)
	return v
}

// pointAt returns the value at pointer p (RFC 6901) in the JSON document doc.
func pointAt(doc []byte, p string) (json.RawMessage, bool) {
	cur := json.RawMessage(doc)
	for _, tok := range strings.Split(p, "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) == nil {
			v, ok := obj[tok]
			if !ok {
				return nil, false
			}
			cur = v
			continue
		}
		var arr []json.RawMessage
		i, err := strconv.Atoi(tok)
		if json.Unmarshal(cur, &arr) != nil || err != nil || i < 0 || i >= len(arr) || tok != strconv.Itoa(i) {
			return nil, false
		}
		cur = arr[i]
	}
	return cur, true
}

// serviceRequest is what a callback service is asked.
type serviceRequest struct {
	Hook   string            `json:"hook"`
	Tool   string            `json:"tool"`
	CallID string            `json:"call_id,omitempty"`
	RunID  string            `json:"run_id,omitempty"`
	Caller events.Identity   `json:"caller,omitzero"`
	Input  json.RawMessage   `json:"input,omitempty"`
	Output json.RawMessage   `json:"output,omitempty"`
	Meta   map[string]string `json:"metadata,omitempty"`
}

// serviceAnswer is a callback service's answer.
type serviceAnswer struct {
	Action string          `json:"action,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// ask sends r to a callback service and reads its answer; an error answer, no answer
// in time, or an answer that is not one are errors.
func ask(ctx context.Context, subject string, timeout tools.Duration, r serviceRequest) (serviceAnswer, error) {
	var a serviceAnswer
	fleet, ok := executor.FleetFrom(ctx)
	if !ok {
		return a, errors.New("a callback service is asked over the fleet's NATS: run the tool in an executor")
	}
	if info, ok := tools.CallInfoFrom(ctx); ok {
		r.Tool, r.CallID, r.RunID, r.Meta = info.Tool, info.CallID, info.RunID, info.Metadata
		r.Caller = events.Identity{Tenant: info.Tenant, Role: info.Role}
	}
	body, err := json.Marshal(r)
	if err != nil {
		return a, err
	}
	wait := events.DefaultHookTimeout
	if timeout > 0 {
		wait = timeout.D()
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	m, err := fleet.Conn.RequestWithContext(ctx, subject, body)
	if err != nil {
		return a, fmt.Errorf("service %s: %w", subject, err)
	}
	if err := json.Unmarshal(m.Data, &a); err != nil {
		return a, fmt.Errorf("service %s: the answer is not a JSON object: %v", subject, err)
	}
	if a.Error != "" {
		return a, fmt.Errorf("service %s: %s", subject, a.Error)
	}
	if string(a.Result) == "null" {
		a.Result = nil
	}
	return a, nil
}

// key is the cache key of a call of tool with input: the tool, then a hash of the
// caller's tenant and the key arguments.
func (c *Cache) key(ctx context.Context, tool string, input json.RawMessage) string {
	h := sha256.New()
	if info, ok := tools.CallInfoFrom(ctx); ok {
		h.Write([]byte(info.Tenant))
	}
	h.Write([]byte{0})
	if len(c.Key) == 0 {
		h.Write(canonical(input))
	}
	for _, p := range c.Key {
		v, ok := pointAt(input, p)
		if !ok {
			v = json.RawMessage("null")
		}
		h.Write(canonical(v))
		h.Write([]byte{0})
	}
	return tool + "." + hex.EncodeToString(h.Sum(nil))
}

// canonical re-encodes a JSON value with sorted keys and no spaces, so that equal
// arguments written differently share a key.
func canonical(b []byte) []byte {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	out, err := json.Marshal(v)
	if err != nil {
		return b
	}
	return out
}

// cacheWait bounds a cache read or write: a slow bucket must not hold the call.
const cacheWait = 2 * time.Second

// lookup returns the stored output of the call, or nil (a miss, or the bucket cannot
// be read: the tool runs).
func (c *Cache) lookup(ctx context.Context, tool string, input json.RawMessage) any {
	if c.resting() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, cacheWait)
	defer cancel()
	kv, err := c.bucket(ctx)
	if err != nil {
		c.failed(ctx, tool, "reading", err)
		return nil
	}
	e, err := kv.Get(ctx, c.key(ctx, tool, input))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			c.failed(ctx, tool, "reading", err)
		}
		return nil
	}
	return json.RawMessage(e.Value())
}

// store keeps output as the call's entry for TTL; a failure only costs later calls
// their hit.
func (c *Cache) store(ctx context.Context, tool string, input json.RawMessage, output any) {
	b, err := tools.MarshalJSON(output)
	if err != nil || c.resting() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cacheWait)
	defer cancel()
	kv, err := c.bucket(ctx)
	if err == nil {
		// Create, not Put: the entry's TTL is set when it is created; one stored by
		// another call meanwhile is as good.
		_, err = kv.Create(ctx, c.key(ctx, tool, input), b, jetstream.KeyTTL(c.TTL.D()))
	}
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		c.failed(ctx, tool, "storing", err)
	}
}

// After a failure, a cache rests for cacheRest; it logs failures at most every
// cacheWarnEvery: often enough to be seen, not at every call of a tool whose bucket is
// down.
const (
	cacheRest      = 10 * time.Second
	cacheWarnEvery = time.Minute
)

func (c *Cache) resting() bool { return time.Now().UnixNano() < c.rests.Load() }

// failed puts the cache to rest and logs, on the executor's log, that reading or
// storing (what) an entry failed.
func (c *Cache) failed(ctx context.Context, tool, what string, err error) {
	now, last := time.Now().UnixNano(), c.warned.Load()
	c.rests.Store(now + int64(cacheRest))
	fleet, _ := executor.FleetFrom(ctx)
	if last != 0 && now-last < int64(cacheWarnEvery) || !c.warned.CompareAndSwap(last, now) {
		return
	}
	fleet.Log.Warn().Err(err).Str("tool", tool).Str("bucket", c.bucketName()).
		Msgf("cache: %s an entry failed; the tool runs without its cache for %s", what, cacheRest)
}

func (c *Cache) bucketName() string {
	if c.Bucket == "" {
		return DefaultCacheBucket
	}
	return c.Bucket
}

// bucket opens (creating it the first time) the cache's bucket on the executor's
// connection.
func (c *Cache) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	fleet, ok := executor.FleetFrom(ctx)
	if !ok {
		return nil, errors.New("no fleet")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if kv, ok := c.kvs[fleet.Conn]; ok {
		return kv, nil
	}
	js, err := jetstream.New(fleet.Conn)
	if err != nil {
		return nil, err
	}
	name := c.bucketName()
	kv, err := js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, History: 1,
			Replicas: fleet.Events.WithDefaults().Replicas, LimitMarkerTTL: time.Minute,
			Description: "toolfleet: cached tool outputs (tools-file callbacks.beforeCall.cache)"})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, name)
		}
	}
	if err != nil {
		return nil, err
	}
	if c.kvs == nil {
		c.kvs = map[*nats.Conn]jetstream.KeyValue{}
	}
	c.kvs[fleet.Conn] = kv
	return kv, nil
}
