package toolret

import (
	"context"
	"math"
	"sort"
	"strings"
	"unicode"
)

// PlainBM25 is the README's reference scorer: textbook Okapi BM25 over the full view,
// tokens split at camelCase, lower-cased, maximal runs of [a-z0-9], no stemming and no
// stop words. It is here to check this package's metrics against the README's figures,
// and it is deliberately simple (a linear scan per query).
type PlainBM25 struct {
	K1, B  float64
	names  []string
	post   map[string][]tfEntry
	lens   []float64
	avg    float64
	df     map[string]int
	nTools float64
}

// NewPlainBM25 indexes the benchmark's full views.
func NewPlainBM25(b *Benchmark, k1, bb float64) *PlainBM25 {
	p := &PlainBM25{K1: k1, B: bb, df: map[string]int{}, post: map[string][]tfEntry{}, nTools: float64(len(b.Tools))}
	var total float64
	for i, text := range b.Full {
		tf := map[string]int{}
		toks := plainTokens(text)
		for _, t := range toks {
			tf[t]++
		}
		for t, n := range tf {
			p.df[t]++
			p.post[t] = append(p.post[t], tfEntry{i, float64(n)})
		}
		p.names = append(p.names, b.Tools[i].Name)
		p.lens = append(p.lens, float64(len(toks)))
		total += float64(len(toks))
	}
	p.avg = total / p.nTools
	return p
}

// Rank returns the ten best tool names for query, ties in file order.
func (p *PlainBM25) Rank(_ context.Context, query string) ([]string, error) {
	q := plainTokens(query)
	scores := make([]float64, len(p.names))
	for _, t := range q { // a repeated query token counts each time
		df := float64(p.df[t])
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (p.nTools-df+0.5)/(df+0.5))
		for _, e := range p.post[t] {
			tf, i := e.tf, e.doc
			scores[i] += idf * tf * (p.K1 + 1) / (tf + p.K1*(1-p.B+p.B*p.lens[i]/p.avg))
		}
	}
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return scores[idx[a]] > scores[idx[b]] })
	out := make([]string, 0, 10)
	for _, i := range idx[:min(10, len(idx))] {
		out = append(out, p.names[i])
	}
	return out, nil
}

type tfEntry struct {
	doc int
	tf  float64
}

func plainTokens(text string) []string {
	var b strings.Builder
	rs := []rune(text)
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte(' ')
			}
		}
		b.WriteRune(r)
	}
	lower := strings.ToLower(b.String())
	return strings.FieldsFunc(lower, func(r rune) bool { return !('a' <= r && r <= 'z' || '0' <= r && r <= '9') })
}
