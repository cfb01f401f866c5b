package planner

import (
	"encoding/json"
	"testing"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// A catalog entry that is not a valid definition withdraws its tool from the planner,
// as from the picker: the catalog has one rule (events.CatalogEntry).
func TestCatalogBadEntryWithdrawsTool(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	kv, err := b.js.KeyValue(b.ctx, events.BucketCatalog)
	if err != nil {
		t.Fatal(err)
	}
	def, _ := json.Marshal(tools.Definition{Type: "function", Name: "by_hand", Description: "Put by hand.",
		Parameters: json.RawMessage(`{"type":"object"}`), Safe: true})
	if _, err := kv.Put(b.ctx, "by_hand", def); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, waitTimeout, "the planner to list by_hand", func() bool { _, ok := b.p.cat.get("by_hand"); return ok })
	if _, err := kv.Put(b.ctx, "by_hand", []byte(`{"name":"someone_else"}`)); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, waitTimeout, "the planner to withdraw by_hand", func() bool { _, ok := b.p.cat.get("by_hand"); return !ok })
}
