package executor

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Before it runs a call, an executor asks whether the call already has a stored result
// (see answered). Asked one call at a time, those look-ups cost a third of the fleet's
// throughput: the results stream answers each on the same goroutine that stores results
// and acknowledges them. So they are coalesced: one look-up loop per executor sends the
// subjects waiting for an answer in one multi-last direct get ("the last message of each
// of these subjects"), and the ones asked while it is out wait for the next. With one
// call in flight that is one request as before; with hundreds, one request answers
// dozens.

// maxLookupBatch bounds the subjects of one request (the server answers at most 1024).
const maxLookupBatch = 256

// lookupTimeout bounds one request; a look-up that times out counts as "not answered"
// for running the call (its result is refused if one exists), never for giving it up.
const lookupTimeout = 5 * time.Second

type lookup struct {
	subject string // a subject, or a filter with wildcards (a call's cancels, of every sender)
	found   chan lookupAnswer
}

// lookupAnswer is the subjects a look-up's filter found holding a message, or why that
// is not known.
type lookupAnswer struct {
	found []string
	err   error
}

// errLookupsOff: the look-up loop could not subscribe to its replies.
var errLookupsOff = errors.New("result look-ups are not served")

// resultLookups is the look-up loop's queue.
type resultLookups struct {
	nc      *nats.Conn
	apiSubj string
	queue   chan lookup
}

// newLookups returns a look-up queue on stream (a results stream, one per shard; the
// events stream for cancels, see cancel.go).
func newLookups(nc *nats.Conn, stream string) *resultLookups {
	return &resultLookups{nc: nc, apiSubj: "$JS.API.DIRECT.GET." + stream, queue: make(chan lookup, maxLookupBatch)}
}

// has reports whether a message is stored on subject of the results stream; an error
// (a timeout, a stopped loop) when that is not known.
func (r *resultLookups) has(ctx context.Context, subject string) (bool, error) {
	found, err := r.find(ctx, subject)
	return len(found) > 0, err
}

// find returns the subjects of the stream that hold a message and that filter (a
// subject, or a filter with wildcards) matches; an error when that is not known.
func (r *resultLookups) find(ctx context.Context, filter string) ([]string, error) {
	l, err := r.enqueue(ctx, filter)
	if err != nil {
		return nil, err
	}
	a := l.await(ctx)
	return a.found, a.err
}

// findEach is find for each of filters, all queued before any answer is awaited, so
// that they go out together (one request per maxLookupBatch of them): answers[i] is
// filters[i]'s.
func (r *resultLookups) findEach(ctx context.Context, filters []string) (answers []lookupAnswer) {
	answers = make([]lookupAnswer, len(filters))
	queued := make([]lookup, 0, len(filters))
	for i, f := range filters {
		l, err := r.enqueue(ctx, f)
		if err != nil {
			for j := i; j < len(filters); j++ {
				answers[j].err = err
			}
			break
		}
		queued = append(queued, l)
	}
	for i, l := range queued {
		answers[i] = l.await(ctx)
	}
	return answers
}

// enqueue hands the look-up of filter to the loop.
func (r *resultLookups) enqueue(ctx context.Context, filter string) (lookup, error) {
	l := lookup{subject: filter, found: make(chan lookupAnswer, 1)}
	select {
	case r.queue <- l:
		return l, nil
	case <-ctx.Done():
		return l, ctx.Err()
	}
}

// await waits for the answer to l.
func (l lookup) await(ctx context.Context) lookupAnswer {
	select {
	case a := <-l.found:
		return a
	case <-ctx.Done():
		return lookupAnswer{err: ctx.Err()}
	}
}

// run serves look-ups until ctx ends. Replies come to one subscription for the loop's
// life (a subscription per request would change the server's subscription list, and
// slow every publish, on each look-up); each request has its own reply subject under
// it, so a late reply to a request that timed out is told apart and dropped.
func (r *resultLookups) run(ctx context.Context) {
	prefix := r.nc.NewRespInbox()
	sub, err := r.nc.SubscribeSync(prefix + ".*")
	if err != nil {
		r.refuseAll(ctx) // every look-up reads "not answered"; results stay single anyway
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	batch := make([]lookup, 0, maxLookupBatch)
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case l := <-r.queue:
			batch = append(batch[:0], l)
		}
	drain:
		for len(batch) < maxLookupBatch {
			select {
			case l := <-r.queue:
				batch = append(batch, l)
			default:
				break drain
			}
		}
		found, err := r.ask(sub, prefix+"."+strconv.Itoa(n), batch)
		for _, l := range batch {
			if m := matching(found, l.subject); len(m) > 0 {
				l.found <- lookupAnswer{found: m}
			} else {
				l.found <- lookupAnswer{err: err}
			}
		}
	}
}

// refuseAll answers every look-up errLookupsOff until ctx ends.
func (r *resultLookups) refuseAll(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case l := <-r.queue:
			l.found <- lookupAnswer{err: errLookupsOff}
		}
	}
}

// ask sends one multi-last direct get for the batch's subjects, with replies to inbox,
// and returns the subjects that hold a message. The reply is a stream of messages (one
// per subject found, the subject in the Nats-Subject header) closed by a 204 status, or
// a single 404 when none is found.
func (r *resultLookups) ask(sub *nats.Subscription, inbox string, batch []lookup) (map[string]bool, error) {
	subjects := make([]string, len(batch))
	for i, l := range batch {
		subjects[i] = l.subject
	}
	body, err := json.Marshal(struct {
		MultiLast []string `json:"multi_last"`
	}{subjects})
	if err != nil {
		return nil, err
	}
	if err := r.nc.PublishRequest(r.apiSubj, inbox, body); err != nil {
		return nil, err
	}
	var found map[string]bool
	deadline := time.Now().Add(lookupTimeout)
	for {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			return found, err
		}
		if m.Subject != inbox {
			continue // a late reply to an earlier request
		}
		switch m.Header.Get("Status") {
		case "":
			if found == nil {
				found = map[string]bool{}
			}
			found[m.Header.Get("Nats-Subject")] = true
		case "204", "404": // end of batch; nothing (more) found
			return found, nil
		default:
			return found, errors.New("results look-up: " + m.Header.Get("Status") + " " + m.Header.Get("Description"))
		}
	}
}

// matching returns the subjects of found that filter matches. A plain subject (every
// result look-up) is one map access, and allocates only when found.
func matching(found map[string]bool, filter string) []string {
	if !strings.ContainsAny(filter, "*>") {
		if found[filter] {
			return []string{filter}
		}
		return nil
	}
	var out []string
	for s := range found {
		if subjectMatches(filter, s) {
			out = append(out, s)
		}
	}
	return out
}

// subjectMatches reports whether filter matches subject, token by token: '*' stands for
// one token, a last '>' for one or more.
func subjectMatches(filter, subject string) bool {
	for {
		ft, frest, fmore := strings.Cut(filter, ".")
		st, srest, smore := strings.Cut(subject, ".")
		switch {
		case ft == ">":
			return true
		case ft != "*" && ft != st:
			return false
		case !fmore || !smore:
			return fmore == smore
		}
		filter, subject = frest, srest
	}
}
