package runrec

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/toolfleet/toolfleet/internal/testsupport/testfill"
	"github.com/toolfleet/toolfleet/pkg/pick"
)

// TestCloneRun fills every field of a run, recursively (its calls, their errors and
// approvals, its messages, the picker's results...), and checks that the copy equals the
// run, as values and as JSON, and shares none of its memory: a field added to these
// types without being copied fails here.
func TestCloneRun(t *testing.T) {
	var r Run
	testfill.Fill(t, reflect.ValueOf(&r).Elem(), "Run", notCopied)
	c := r.Clone()
	if !reflect.DeepEqual(&r, c) {
		t.Fatalf("the copy differs:\n%+v\n%+v", r, *c)
	}
	a, _ := json.Marshal(&r)
	b, _ := json.Marshal(c)
	if string(a) != string(b) {
		t.Fatalf("the copy's JSON differs:\n%s\n%s", a, b)
	}
	noSharing(t, reflect.ValueOf(&r).Elem(), reflect.ValueOf(c).Elem(), "Run")

	// Writing to the copy leaves the original as it was.
	c.Calls[0].Status = "changed"
	c.Calls[0].Arguments[0] = '!'
	c.Offered[0].Tools[0] = "changed"
	c.Lease.Step = 99
	if r.Calls[0].Status == "changed" || r.Calls[0].Arguments[0] == '!' || r.Offered[0].Tools[0] == "changed" || r.Lease.Step == 99 {
		t.Fatal("writing to the copy changed the original")
	}
	if (*Run)(nil).Clone() != nil {
		t.Fatal("a nil run's copy is not nil")
	}
}

// notCopied are fields a run never holds a value in, left zero by fill: the catalog
// keeps a picked tool's definition (stepTools empties it).
var notCopied = map[reflect.Type]map[string]bool{
	reflect.TypeFor[pick.Result](): {"Definition": true},
}

// noSharing fails when a and b (equal values) share a pointer, a slice's array or a map.
func noSharing(t *testing.T, a, b reflect.Value, path string) {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() {
			return
		}
		if a.Pointer() == b.Pointer() {
			t.Errorf("%s is shared by the copy", path)
			return
		}
		noSharing(t, a.Elem(), b.Elem(), path+"*")
	case reflect.Slice:
		if a.Len() == 0 {
			return
		}
		if a.Pointer() == b.Pointer() {
			t.Errorf("%s is shared by the copy", path)
			return
		}
		for i := range a.Len() {
			noSharing(t, a.Index(i), b.Index(i), path+"[]")
		}
	case reflect.Map:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			t.Errorf("%s is shared by the copy", path)
		}
	case reflect.Struct:
		for i := range a.NumField() {
			noSharing(t, a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name)
		}
	}
}
