package tools

import "reflect"

// FastAndFull validates raw arguments of the tool called name both ways, for tests that
// keep the fast path honest: covered says whether the schema is within the fast path, fast
// its answer, full the compiled validator's.
func (r *Registry) FastAndFull(name string, raw []byte) (covered, fast, full bool) {
	e := r.snap.Load().byName[name]
	_, v, err := parseArguments(raw)
	if err != nil || e == nil || e.params == nil {
		return false, false, false
	}
	full = e.params.Validate(v) == nil
	if e.fast == nil {
		return false, false, full
	}
	return true, e.fast.valid(v), full
}

// DirectDecoder reports whether values of t are decoded straight from the parsed arguments
// (true) or by encoding/json from the bytes (false).
func DirectDecoder(t reflect.Type) bool { return decoderFor(t) != nil }
