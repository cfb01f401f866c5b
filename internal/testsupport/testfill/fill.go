// Package testfill fills a value's every field, recursively, with non-zero values, for
// tests that must notice a field added to a type: a copy that forgets it, an encoder
// that leaves it out.
package testfill

import (
	"reflect"
	"testing"
	"time"
	"unsafe"
)

// Fill sets every field under v (settable, or unexported: set through its address) to a
// non-zero value: strings "s", numbers 7 (1.5), true, a 2006-like fixed time, two
// elements per slice, one entry per map, byte slices `"v"` (a JSON value). Interfaces
// stay nil; fields named in skip[type] are left zero. path names v in failures.
func Fill(t testing.TB, v reflect.Value, path string, skip map[reflect.Type]map[string]bool) {
	t.Helper()
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
		Fill(t, p.Elem(), path+"*", skip)
		v.Set(p)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // JSON values
			v.SetBytes([]byte(`"v"`))
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			Fill(t, s.Index(i), path+"[]", skip)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		Fill(t, k, path+".key", skip)
		Fill(t, e, path+".value", skip)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if skip[v.Type()][f.Name] {
				continue
			}
			fv := v.Field(i)
			if !fv.CanSet() { // an unexported field: set through its address
				fv = reflect.NewAt(fv.Type(), unsafe.Pointer(fv.UnsafeAddr())).Elem()
			}
			Fill(t, fv, path+"."+f.Name, skip)
		}
	case reflect.Interface:
	default:
		t.Fatalf("testfill: %s is a %s: teach Fill", path, v.Kind())
	}
}
