package jsutil

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// Watch starts kv.Watch(ctx, keys, opts...), trying again as [RetrySetup] does when a
// try fails or goes unanswered for 10s. A watch's context lasts as long as the watch,
// so nats.go waits for the answer to the request that creates its consumer until ctx
// ends: a request lost to a node's death or a meta-leader election (a cluster drops
// requests it has no leader for) would hold the caller for all of ctx (a run's wait,
// the planner's life). A try abandoned this way stops its watch, if one came of it.
// The watch returned lasts until ctx ends or Stop.
func Watch(ctx context.Context, kv jetstream.KeyValue, keys string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	var w jetstream.KeyWatcher
	err := RetrySetup(ctx, func(try context.Context) error {
		wctx, cancel := context.WithCancel(ctx)
		abandon := context.AfterFunc(try, cancel)
		kw, err := kv.Watch(wctx, keys, opts...)
		if !abandon() { // the try ran out: the watch, if any, went with wctx
			cancel()
			if err == nil {
				_ = kw.Stop() // abandoned with its try: a failed stop leaves nothing to do
				err = try.Err()
			}
			return err
		}
		if err != nil {
			cancel()
			return err
		}
		w = ownedWatch{kw, cancel}
		return nil
	}, nil)
	return w, err
}

// ownedWatch is a watch with its own context, released when it stops.
type ownedWatch struct {
	jetstream.KeyWatcher
	cancel context.CancelFunc
}

func (w ownedWatch) Stop() error {
	defer w.cancel()
	return w.KeyWatcher.Stop()
}

// ListKeys returns the keys of kv that match filter (those with a value), asking again
// as [Watch] does when a request is lost: kv.ListKeysFiltered is a watch too, and would
// wait for the lost request as long as ctx lasts (a sweeper's whole life).
func ListKeys(ctx context.Context, kv jetstream.KeyValue, filter string) ([]string, error) {
	w, err := Watch(ctx, kv, filter, jetstream.IgnoreDeletes(), jetstream.MetaOnly())
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	var keys []string
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("list keys: the watch closed before the last key")
			}
			if e == nil { // the initial values are all in
				return keys, nil
			}
			keys = append(keys, e.Key())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
