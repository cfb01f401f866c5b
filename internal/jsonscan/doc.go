// Package jsonscan is toolfleet's one hand-written JSON reader. The hot paths read JSON
// without encoding/json's reflection, which costs them three to four times as much: a
// tool's arguments are parsed once into the generic values the schema validator walks
// ([Parse]), a call event's body is read in one pass and a result's output is checked
// before it is copied into an event (a [Scanner] reading token by token).
//
// # One grammar, read two ways
//
// Every reader here walks the same recursive grammar, once: a [Scanner] either builds
// what it reads (map[string]any, []any, string, [encoding/json.Number], bool or nil, as
// encoding/json does with UseNumber) or only checks it ([Scanner.Skip]), allocating
// nothing. Both accept exactly what encoding/json accepts, up to [MaxDepth] levels of
// nesting, and a refusal is a [SyntaxError] that says what was wrong and where. The
// fuzz tests hold both to encoding/json.
//
// # Reading by hand
//
// Callers that decode one known shape (pkg/events' call body) step through it with
// [Scanner.SkipSpace], [Scanner.Accept], [Scanner.PlainString], [Scanner.Colon],
// [Scanner.Skip] and [Scanner.Next], and hand anything else to encoding/json.
//
// json/v2 would make much of this unnecessary; it is still experimental in Go 1.26.
package jsonscan
