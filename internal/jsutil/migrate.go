package jsutil

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/tick"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// RetiredRunLogSubject is the only subject of [events.StreamRunLog] once its records
// were copied into the journal: nothing publishes on it, and the stream keeps its
// messages, under their own subjects, until the operator deletes it.
const RetiredRunLogSubject = "toolfleet.runlog-retired"

// runLogMigratedKey, in the metadata of the retired run log, says its records are all in
// the journal. Its subjects alone cannot say it: a planner stopped after retiring them
// left a copy to finish.
const runLogMigratedKey = "toolfleet.migrated-to"

// migrationStall bounds how long the copy of the old run log may make no progress
// before EnsurePlanner gives up (the next try, or start, goes on where it stopped).
var migrationStall = time.Minute

// RunLogRetired tells whether the run log of an earlier version, [events.StreamRunLog],
// is still there with every record of it copied into the journal: the operator may
// delete it (nats stream rm TOOLFLEET_RUNLOG).
func RunLogRetired(ctx context.Context, js jetstream.JetStream) (bool, error) {
	s, err := js.Stream(ctx, events.StreamRunLog)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look for stream %s: %w", events.StreamRunLog, err)
	}
	return s.CachedInfo().Config.Metadata[runLogMigratedKey] != "", nil
}

// migrateRunLog copies the run log of an earlier version, the stream
// [events.StreamRunLog] on the subjects the journal now takes, into the journal, so that
// no run loses its conversation:
//
//  1. the old stream's subjects become RetiredRunLogSubject (its messages keep theirs),
//     which frees the run log's subjects for the journal;
//  2. the journal takes them and sources the old stream: each record is copied under
//     its own subject, so a record written once stays written once (a second write,
//     expecting no message on the subject, is refused);
//  3. once the journal holds the old stream's last record, the old stream is marked
//     migrated. The journal's source is dropped by the journal's next ensure.
//
// Each step is idempotent, so planners starting together all do it, and a planner
// stopped between two steps leaves the rest to the next start. The journal keeps its
// place in a source across config updates, so a repeated step 2 copies nothing twice;
// a record copied twice would only replace itself (one message per subject). The old
// stream is not deleted: a planner's NATS user may not.
func migrateRunLog(ctx context.Context, js jetstream.JetStream, cfg events.Config) error {
	old, err := js.Stream(ctx, events.StreamRunLog)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look for stream %s: %w", events.StreamRunLog, err)
	}
	oc := old.CachedInfo().Config
	if oc.Metadata[runLogMigratedKey] != "" {
		return nil
	}
	if !slices.Contains(oc.Subjects, events.AllRunLog) && !slices.Equal(oc.Subjects, []string{RetiredRunLogSubject}) {
		return fmt.Errorf("stream %s has subjects %v, neither the run log's (%s) nor a retired run log's (%s): "+
			"it is not the run log of an earlier version; rename or delete it", events.StreamRunLog, oc.Subjects,
			events.AllRunLog, RetiredRunLogSubject)
	}
	// 1. Retire the old stream's subjects.
	oc.Subjects = []string{RetiredRunLogSubject}
	if err := updateStream(ctx, js, oc); err != nil {
		return fmt.Errorf("migrate the run log: retire the subjects of %s: %w", events.StreamRunLog, err)
	}
	// 2. The journal takes the run log's subjects and copies the old records.
	jc := cfg.JournalStream()
	jc.Sources = []*jetstream.StreamSource{{Name: events.StreamRunLog}}
	if err := ensureStream(ctx, js, jc); err != nil {
		return fmt.Errorf("migrate the run log: source %s into %s: %w", events.StreamRunLog, events.StreamJournal, err)
	}
	if err := awaitCopy(ctx, js, old); err != nil {
		return fmt.Errorf("migrate the run log: %w", err)
	}
	// 3. Mark it migrated, keeping whatever else its metadata says.
	oc.Metadata = maps.Clone(oc.Metadata)
	if oc.Metadata == nil {
		oc.Metadata = map[string]string{}
	}
	oc.Metadata[runLogMigratedKey] = events.StreamJournal
	if err := updateStream(ctx, js, oc); err != nil {
		return fmt.Errorf("migrate the run log: mark %s migrated: %w", events.StreamRunLog, err)
	}
	return nil
}

// updateStream updates the stream to sc, retrying unanswered requests.
func updateStream(ctx context.Context, js jetstream.JetStream, sc jetstream.StreamConfig) error {
	return retryRace(ctx, func(ctx context.Context) error {
		_, err := js.UpdateStream(ctx, sc)
		return err
	})
}

// awaitCopy waits until the journal holds the last record of old. A source copies in
// order, so the last one there means all are. It fails when the source's lag has not
// shrunk for migrationStall.
func awaitCopy(ctx context.Context, js jetstream.JetStream, old jetstream.Stream) error {
	last, err := old.GetLastMsgForSubject(ctx, events.AllRunLog)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil // nothing to copy
	}
	if err != nil {
		return fmt.Errorf("read the last record of %s: %w", events.StreamRunLog, err)
	}
	journal, err := js.Stream(ctx, events.StreamJournal)
	if err != nil {
		return fmt.Errorf("stream %s: %w", events.StreamJournal, err)
	}
	lag, progressed := uint64(1<<63), time.Now()
	for {
		// Any replica may answer; one that has not stored it yet only makes us ask again.
		if _, err := journal.GetLastMsgForSubject(ctx, last.Subject); err == nil {
			return nil
		} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("read %s on %s: %w", last.Subject, events.StreamJournal, err)
		}
		info, err := journal.Info(ctx)
		if err != nil {
			return fmt.Errorf("stream %s: %w", events.StreamJournal, err)
		}
		for _, si := range info.Sources {
			if si.Name == events.StreamRunLog && si.Lag < lag {
				lag, progressed = si.Lag, time.Now()
			}
		}
		if time.Since(progressed) > migrationStall {
			return fmt.Errorf("%s has copied no record of %s for %s (%d to go); the next start goes on",
				events.StreamJournal, events.StreamRunLog, migrationStall, lag)
		}
		if !tick.Sleep(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}
