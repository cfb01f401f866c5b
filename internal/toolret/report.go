package toolret

import (
	"context"
	"fmt"
	"io"

	"github.com/toolfleet/toolfleet/pkg/pick"
)

// PickRanker ranks with the picker library: MaxCandidates 10 and MinScore 0, so that the
// top ten are as the scorer ranks them, nothing cut by a threshold.
func PickRanker(cat *pick.Catalog, opts pick.Options) Ranker {
	opts.MaxCandidates = 10
	opts.MinScore = new(0.0)
	return func(ctx context.Context, q string) ([]string, error) {
		res, err := pick.Pick(ctx, q, cat, opts)
		if err != nil {
			return nil, err
		}
		names := make([]string, len(res))
		for i, r := range res {
			names[i] = r.Name
		}
		return names, nil
	}
}

// Report evaluates the default scorer on every folder of dir and writes a table beside
// the README's plain-BM25 baseline. The defaults were tuned on these very queries, so
// the figures flatter them; [CrossValidate] gives the ones on unseen queries. It returns
// the figures by folder.
func Report(ctx context.Context, w io.Writer, dir string) (map[string]Metrics, error) {
	out := map[string]Metrics{}
	fmt.Fprintf(w, "%-9s  %-34s  %s\n", "benchmark", "scorer", "figures (×100, all queries, the ones tuned on)")
	for _, folder := range Folders {
		b, err := Load(dir, folder)
		if err != nil {
			return nil, err
		}
		cat, err := pick.NewCatalog(b.Tools)
		if err != nil {
			return nil, err
		}
		m, err := b.Evaluate(ctx, PickRanker(cat, pick.Options{}))
		if err != nil {
			return nil, err
		}
		out[folder] = m
		fmt.Fprintf(w, "%-9s  %-34s  %s\n", folder, "README plain BM25 (full, 0.9/0.4)", Reference[folder])
		fmt.Fprintf(w, "%-9s  %-34s  %s  (%d queries, %d tools)\n", folder, "picker default (BM25F)", m, m.Queries, len(b.Tools))
	}
	return out, nil
}
