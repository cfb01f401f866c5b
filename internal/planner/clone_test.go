package planner

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/toolfleet/toolfleet/pkg/pick"
)

// TestCloneRun fills every field of a run, recursively (its calls, their errors and
// approvals, its messages, the picker's results...), and checks that the copy equals the
// run, as values and as JSON, and shares none of its memory: a field added to these
// types without being copied fails here.
func TestCloneRun(t *testing.T) {
	var r Run
	fill(t, reflect.ValueOf(&r).Elem(), "Run")
	c := r.clone()
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
	if (*Run)(nil).clone() != nil {
		t.Fatal("a nil run's copy is not nil")
	}
}

// notCopied are fields a run never holds a value in, left zero by fill: the catalog
// keeps a picked tool's definition (stepTools empties it).
var notCopied = map[reflect.Type]map[string]bool{
	reflect.TypeFor[pick.Result](): {"Definition": true},
}

// fill sets every settable field under v to a non-zero value; interfaces stay nil.
func fill(t *testing.T, v reflect.Value, path string) {
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), path+"*")
		v.Set(p)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // JSON values
			v.SetBytes([]byte(`"v"`))
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(t, s.Index(i), path+"[]")
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, path+".key")
		fill(t, e, path+".value")
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if notCopied[v.Type()][f.Name] {
				continue
			}
			fv := v.Field(i)
			if !fv.CanSet() { // an unexported field: set through its address
				fv = reflect.NewAt(fv.Type(), unsafe.Pointer(fv.UnsafeAddr())).Elem()
			}
			fill(t, fv, path+"."+f.Name)
		}
	case reflect.Interface:
	default:
		t.Fatalf("fill: %s is a %s: teach the test", path, v.Kind())
	}
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
