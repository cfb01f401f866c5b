package pickerservice

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/toolfleet/toolfleet/pkg/pick"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Request is the body of a pick request.
type Request struct {
	// Input is the request to pick tools for: a JSON string or any JSON value.
	Input json.RawMessage `json:"input"`
	// Options are optional.
	Options RequestOptions `json:"options"`
}

// RequestOptions are pick.Options plus the name of the scorer to use.
type RequestOptions struct {
	pick.Options
	// Scorer names the scorer: "bm25" (the default), "usage" (the default when the
	// service learns from usage, see WithLearning), or "embedding" and "hybrid" when the
	// service has an embeddings endpoint.
	Scorer string `json:"scorer,omitempty"`
	// Tenant is the caller's tenant: the usage scorer ranks with what that tenant's
	// runs used (and only that, unless the service shares usage). Empty: anonymous
	// callers' usage.
	Tenant string `json:"tenant,omitempty"`
}

// Response is the body of a successful pick reply.
type Response struct {
	Results []pick.Result `json:"results"`
	// CatalogVersion is the version of the index the pick ranked.
	CatalogVersion uint64 `json:"catalogVersion"`
	// Fallback is set when scoring timed out and the results are in registration order.
	Fallback bool `json:"fallback"`
}

// Micro error codes of the pick endpoint.
const (
	CodeBadRequest  = "400"
	CodeScorer      = "500"
	CodeUnavailable = "503"
)

// handle serves a request before it returns: micro measures a request's processing
// time and counts its error around the handler, so a handler that handed the request to
// a goroutine would make `nats micro stats` report no errors and a fraction of the time.
// Parallel picks come from parallel endpoints (see WithConcurrency). Run waits for the
// requests being served; once it stopped, those the draining endpoint still delivers are
// served too.
func (s *Service) handle(req micro.Request) {
	s.stopMu.Lock()
	if s.stopped {
		s.stopMu.Unlock()
		s.serve(req)
		return
	}
	s.serving.Add(1)
	s.stopMu.Unlock()
	defer s.serving.Done()
	s.serve(req)
}

func (s *Service) serve(req micro.Request) {
	start := time.Now()
	resp, scorer, code, err := s.pickFor(req.Data())
	if err != nil {
		outcome := map[string]string{CodeBadRequest: "bad_request", CodeUnavailable: "unavailable", CodeScorer: "scorer_error"}[code]
		s.m.requests.WithLabelValues(outcome).Inc()
		s.o.log.Debug().Err(err).Str("code", code).Msg("pick refused")
		if rerr := req.Error(code, err.Error(), nil); rerr != nil {
			s.o.log.Warn().Err(rerr).Msg("pick: reply failed")
		}
		return
	}
	if resp.Fallback {
		s.m.fallbacks.Inc()
	}
	s.m.requests.WithLabelValues("ok").Inc()
	body, err := json.Marshal(resp)
	if err != nil { // provenance from a custom scorer that does not marshal
		if rerr := req.Error(CodeScorer, "pick: encode reply: "+err.Error(), nil); rerr != nil {
			s.o.log.Warn().Err(rerr).Msg("pick: reply failed")
		}
		return
	}
	if err := req.Respond(body); err != nil {
		s.o.log.Warn().Err(err).Msg("pick: reply failed")
	}
	s.m.latency.WithLabelValues(scorer).Observe(time.Since(start).Seconds())
}

// pickFor decodes a request body and picks with the named scorer; code is a micro error
// code when err is set.
func (s *Service) pickFor(body []byte) (resp *Response, scorer, code string, err error) {
	var r Request
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields() // a misspelt option is an error, not a silent default
	if err := dec.Decode(&r); err != nil {
		return nil, "", CodeBadRequest, fmt.Errorf("malformed pick request: %w", err)
	}
	if dec.More() {
		return nil, "", CodeBadRequest, errors.New("malformed pick request: data after the JSON object")
	}
	name := r.Options.Scorer
	if name == "" {
		name = "bm25"
		if s.o.learned != nil {
			name = UsageScorer
		}
	}
	sc, ok := s.o.scorers[name]
	if name == UsageScorer && s.o.learned != nil {
		sc, ok = s.o.learned.Scorer(r.Options.Tenant), true
	}
	if !ok {
		return nil, name, CodeBadRequest, fmt.Errorf("unknown scorer %q (have %s)", name, strings.Join(s.scorerNames(), ", "))
	}
	if !s.ready.Load() {
		return nil, name, CodeUnavailable, errors.New("catalog not loaded yet")
	}
	if !s.usageReplayed() {
		return nil, name, CodeUnavailable, errors.New("usage not replayed yet")
	}
	opts := r.Options.Options
	opts.Scorer = sc
	if opts.Timeout == 0 {
		opts.Timeout = tools.Duration(s.o.timeout)
	}
	snap := s.catalog.Snapshot()
	var input any = r.Input
	if len(r.Input) == 0 {
		input = nil
	}
	res, err := snap.Pick(context.Background(), input, opts)
	switch {
	case errors.Is(err, pick.ErrEmptyInput), errors.Is(err, pick.ErrInvalidOption):
		return nil, name, CodeBadRequest, err
	case err != nil:
		return nil, name, CodeScorer, err
	}
	resp = &Response{Results: res, CatalogVersion: snap.Version()}
	resp.Fallback = slices.ContainsFunc(res, func(r pick.Result) bool { return r.Provenance.Fallback })
	return resp, name, "", nil
}

func (s *Service) scorerNames() []string {
	var names []string
	for n := range s.o.scorers {
		names = append(names, n)
	}
	if s.o.learned != nil {
		names = append(names, UsageScorer)
	}
	sort.Strings(names)
	return names
}
