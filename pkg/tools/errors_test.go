package tools

import (
	"go/ast"
	goparser "go/parser"
	"go/token"
	"strconv"
	"testing"
)

// codesInSource returns every constant of type Code declared in errors.go, the one file
// that holds them all.
func codesInSource(t *testing.T) []Code {
	t.Helper()
	f, err := goparser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []Code
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
				continue
			}
			for _, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok {
					t.Fatalf("a Code constant is not a string literal: %#v", v)
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				codes = append(codes, Code(s))
			}
		}
	}
	return codes
}

// A new code must be decided on: retried or not. Without a decision it is never retried,
// and this test says so.
func TestEveryCodeHasARetryDecision(t *testing.T) {
	t.Parallel()
	codes := codesInSource(t)
	if len(codes) < 16 {
		t.Fatalf("found %d codes in errors.go, want at least 16: is the parser still finding them?", len(codes))
	}
	for _, c := range codes {
		if _, ok := retryable[c]; !ok {
			t.Errorf("code %s has no retry decision: add it to retryable in errors.go", c)
		}
	}
	if len(retryable) != len(codes) {
		t.Errorf("retryable decides %d codes, errors.go declares %d", len(retryable), len(codes))
	}
}

func TestRetryable(t *testing.T) {
	t.Parallel()
	retried := map[Code]bool{CodeToolFailed: true, CodeToolPanic: true, CodeTimeout: true, CodeInternal: true}
	for _, c := range codesInSource(t) {
		if got := c.Retryable(); got != retried[c] {
			t.Errorf("%s.Retryable() = %v, want %v", c, got, retried[c])
		}
	}
	for _, c := range []Code{"", "no_such_code", "loop_detected"} {
		if c.Retryable() {
			t.Errorf("unknown code %q is retryable; retrying is opt-in", c)
		}
	}
	for _, c := range RetryableByDefault() {
		if !c.Retryable() {
			t.Errorf("RetryableByDefault lists %s, which is not retryable", c)
		}
	}
	// RetryOn cannot turn on what can never succeed, output_too_large above all.
	p := RetryPolicy{RetryOn: []Code{CodeOutputTooLarge, CodeInvalidInput, "no_such_code", CodeTimeout}}
	for _, c := range []Code{CodeOutputTooLarge, CodeInvalidInput, "no_such_code"} {
		if p.ShouldRetry(c) {
			t.Errorf("ShouldRetry(%s) with it in RetryOn = true, want false", c)
		}
	}
	if !p.ShouldRetry(CodeTimeout) || p.ShouldRetry(CodeToolFailed) {
		t.Error("RetryOn no longer decides among retryable codes")
	}
}
