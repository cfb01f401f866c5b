package planner

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// ApprovalStatus is where an approval request is: pending, or how it was answered.
type ApprovalStatus string

// Approval statuses.
const (
	ApprovalPending  ApprovalStatus = "pending"
	ApprovalApproved ApprovalStatus = "approved"
	ApprovalDenied   ApprovalStatus = "denied"
	ApprovalExpired  ApprovalStatus = "expired"
	ApprovalCanceled ApprovalStatus = "canceled"
)

// ApprovalItem is a call that asked for an approval, as GET /v1/approvals lists it.
type ApprovalItem struct {
	CallID string `json:"callId"`
	RunID  string `json:"runId"`
	Tool   string `json:"tool"`
	// ParentCallID, for a sub-call of a composite call, is the composite call's id.
	ParentCallID string `json:"parentCallId,omitempty"`
	// Arguments are the call's, or ArgumentsRef points at them (stored by reference).
	Arguments    json.RawMessage    `json:"arguments,omitempty"`
	ArgumentsRef *events.PayloadRef `json:"argumentsRef,omitempty"`
	Reason       string             `json:"reason,omitempty"`
	// RequestedAt is when the executor asked (the call's time when the request is no
	// longer stored); ExpiresAt when the request is denied unanswered.
	RequestedAt time.Time  `json:"requestedAt"`
	ExpiresAt   *time.Time `json:"expiresAt,omitempty"`
	// Caller is the identity the call was made with (the run's owner).
	Caller       events.Identity `json:"caller"`
	AnswerableBy AnswerableBy    `json:"answerableBy"`
	Status       ApprovalStatus  `json:"status"`
	// Approval is the decision record, once answered.
	Approval *events.Approval `json:"approval,omitempty"`
	// AnsweredAt is when it was answered (it orders answered approvals): the answer's
	// time, the expiry, or when the call ended (canceled); By who answered (the
	// answerer's identity, Identity.Describe(); for a cancel, the canceler's; empty
	// for an expiry) and ClaimedBy what the answer's own by said.
	AnsweredAt time.Time `json:"answeredAt,omitzero"`
	By         string    `json:"by,omitempty"`
	ClaimedBy  string    `json:"claimedBy,omitempty"`

	// detailed says the request was read.
	detailed bool
}

// AnswerableBy says who may answer an approval: the roles (the run owner's and the
// operator roles, each only if it may call the tool); an empty list: any role.
type AnswerableBy struct {
	Roles []string `json:"roles"`
}

// ApprovalPage is a page of approvals; Next, when set, is the cursor of the next.
type ApprovalPage struct {
	Approvals []ApprovalItem `json:"approvals"`
	Next      string         `json:"next,omitempty"`
}

// ApprovalFilter selects approvals for [Planner.ListApprovals].
type ApprovalFilter struct {
	// Status is pending (the default), answered or all.
	Status string
	Limit  int
	Cursor string
}

// approvalCursor is the position after an approval: its place in the list (pending
// first, oldest first; then answered, newest first).
type approvalCursor struct {
	answered bool
	at       time.Time
	call     string
}

func (c approvalCursor) encode() string {
	kind := "p"
	if c.answered {
		kind = "a"
	}
	return base64.RawURLEncoding.EncodeToString([]byte(kind + "." + strconv.FormatInt(c.at.UnixNano(), 10) + "." + c.call))
}

func decodeApprovalCursor(s string) (approvalCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		parts := strings.SplitN(string(b), ".", 3)
		if len(parts) == 3 && (parts[0] == "p" || parts[0] == "a") && parts[2] != "" {
			if n, err := strconv.ParseInt(parts[1], 10, 64); err == nil {
				return approvalCursor{answered: parts[0] == "a", at: time.Unix(0, n).UTC(), call: parts[2]}, nil
			}
		}
	}
	return approvalCursor{}, filterErrorf("cursor", "%q is not a cursor of this list (give the next of the previous page)", s)
}

// ListApprovals lists caller's tenant's approvals: the calls waiting for one (from the
// runs' control states, in the run index) oldest first, then the ones answered lately
// (the last maxAnsweredApprovals of the tenant this replica saw answered, or found
// answered in the runs' current steps when it started), newest first. The request's
// details (arguments, reason, expiry) are read once from the events stream, where the
// executor stored it.
func (p *Planner) ListApprovals(ctx context.Context, caller events.Identity, f ApprovalFilter) (ApprovalPage, error) {
	switch f.Status {
	case "":
		f.Status = "pending"
	case "pending", "answered", "all":
	default:
		return ApprovalPage{}, filterErrorf("status", "must be pending, answered or all, got %q", f.Status)
	}
	limit, err := CheckLimit(f.Limit)
	if err != nil {
		return ApprovalPage{}, err
	}
	var after *approvalCursor
	if f.Cursor != "" {
		c, err := decodeApprovalCursor(f.Cursor)
		if err != nil {
			return ApprovalPage{}, err
		}
		after = &c
	}
	if err := p.awaitIndex(ctx); err != nil {
		return ApprovalPage{}, err
	}
	items, next := p.index.listApprovals(caller.Tenant, f.Status, limit, after)
	page := ApprovalPage{Approvals: make([]ApprovalItem, 0, len(items)), Next: next}
	for _, it := range items {
		if !it.detailed {
			p.readApprovalRequest(ctx, it)
		}
		item := *it
		item.AnswerableBy = p.answerableBy(item)
		page.Approvals = append(page.Approvals, item)
	}
	return page, nil
}

// listApprovals returns the page of the tenant's approvals after the cursor, as copies.
func (x *runIndex) listApprovals(tenant, status string, limit int, after *approvalCursor) ([]*ApprovalItem, string) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	tr := x.tenants[tenant]
	if tr == nil {
		return nil, ""
	}
	var list []*ApprovalItem
	if status != "answered" && (after == nil || !after.answered) {
		pending := make([]*ApprovalItem, 0, len(tr.pending))
		for _, it := range tr.pending {
			if after == nil || keyBefore(after.at, after.call, it.RequestedAt, it.CallID) {
				pending = append(pending, it)
			}
		}
		slices.SortFunc(pending, func(a, b *ApprovalItem) int {
			if c := a.RequestedAt.Compare(b.RequestedAt); c != 0 {
				return c
			}
			return strings.Compare(a.CallID, b.CallID)
		})
		list = pending
	}
	if status != "pending" {
		for i := len(tr.answered) - 1; i >= 0; i-- {
			it := tr.answered[i]
			if after != nil && after.answered && !keyBefore(it.AnsweredAt, it.CallID, after.at, after.call) {
				continue
			}
			list = append(list, it)
			if len(list) > limit {
				break
			}
		}
	}
	next := ""
	if len(list) > limit {
		list = list[:limit]
		last := list[limit-1]
		if last.Status == ApprovalPending {
			next = approvalCursor{at: last.RequestedAt, call: last.CallID}.encode()
		} else {
			next = approvalCursor{answered: true, at: last.AnsweredAt, call: last.CallID}.encode()
		}
	}
	out := make([]*ApprovalItem, len(list))
	for i, it := range list {
		c := *it
		c.Arguments = slices.Clone(it.Arguments)
		out[i] = &c
	}
	return out, next
}

// readApprovalRequest fills it (a copy of the index's item) with its request's details,
// read from the events stream, and keeps them in the index's item for the next lists.
func (p *Planner) readApprovalRequest(ctx context.Context, it *ApprovalItem) {
	subj, err := events.ApprovalRequestedSubject(it.Caller.Tenant, it.Tool, it.CallID)
	if err != nil {
		return
	}
	stream, err := p.js.Stream(ctx, events.StreamEvents)
	if err != nil {
		return
	}
	m, err := stream.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			p.index.detail(it) // gone (its stream's max age): nothing more to read
		}
		return
	}
	e, req, err := events.DecodeApprovalRequest(events.StoredMsg(m))
	if err != nil {
		p.index.detail(it)
		return
	}
	it.Arguments, it.ArgumentsRef, it.Reason, it.RequestedAt = req.Arguments, req.ArgumentsRef, req.Reason, e.Time
	if !req.ExpiresAt.IsZero() {
		exp := req.ExpiresAt
		it.ExpiresAt = &exp
	}
	p.index.detail(it)
}

// detail keeps the details read of an approval request in the index's items of its
// call (pending and answered). The pending order keeps the call's time.
func (x *runIndex) detail(it *ApprovalItem) {
	x.mu.Lock()
	defer x.mu.Unlock()
	tr := x.tenants[it.Caller.Tenant]
	if tr == nil {
		return
	}
	set := func(k *ApprovalItem) {
		k.Arguments, k.ArgumentsRef, k.Reason, k.ExpiresAt, k.detailed = it.Arguments, it.ArgumentsRef, it.Reason, it.ExpiresAt, true
	}
	if k := tr.pending[it.CallID]; k != nil {
		set(k)
	}
	if tr.answeredIDs[it.CallID] {
		for _, k := range tr.answered {
			if k.CallID == it.CallID {
				set(k)
			}
		}
	}
}

// answerableBy lists the roles that may answer the approval of item: the run owner's
// and the operator roles, each if it may call the tool; none (any role) for an
// anonymous run.
func (p *Planner) answerableBy(item ApprovalItem) AnswerableBy {
	out := AnswerableBy{Roles: []string{}}
	if item.Caller.Role == "" {
		return out
	}
	d, known := p.cat.get(item.Tool)
	for _, role := range append([]string{item.Caller.Role}, p.cfg.OperatorRoles...) {
		if slices.Contains(out.Roles, role) || known && !d.AllowsCaller(item.Caller.Tenant, role) {
			continue
		}
		out.Roles = append(out.Roles, role)
	}
	return out
}
