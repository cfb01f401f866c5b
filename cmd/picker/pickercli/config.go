package pickercli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/toolfleet/toolfleet/internal/envflag"
	"github.com/toolfleet/toolfleet/internal/natsconn"
	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/internal/pickerservice"
)

// Config is the picker program's configuration.
type Config struct {
	NATS natsconn.Config
	// EmbeddingsURL, when set, enables the embedding and hybrid scorers against this
	// OpenAI-compatible server, with EmbeddingsModel and EmbeddingsAPIKey.
	EmbeddingsURL, EmbeddingsModel, EmbeddingsAPIKey string
	// StreamReplicas is the replicas of the embeddings bucket, created by the picker.
	StreamReplicas int
	// Timeout bounds scoring for requests without their own; see pickerservice.WithDefaultTimeout.
	Timeout time.Duration
	// Learn makes the picker learn from the usage stream (pickerservice.WithLearning);
	// ShareUsage lets every tenant's usage shape every tenant's picks.
	Learn, ShareUsage bool
	// Ops is the ops server's address and the log level, as in every program.
	Ops ops.Config
}

// Parse reads the configuration from args (without the program name) and the
// environment, and validates it. With -h it returns flag.ErrHelp after writing the usage
// to out.
func Parse(args []string, out io.Writer) (Config, error) {
	var c Config
	var env envflag.Env
	fs := flag.NewFlagSet("picker", flag.ContinueOnError)
	fs.SetOutput(out)
	ops.Usage(fs, `The toolfleet picker: the pickTools service (NATS micro, toolfleet.picker.>)
that ranks the live tool catalog for a run's request, learning from the fleet's usage
per tenant. "picker eval" measures its choices on a data set.
Each flag's default is its TOOLFLEET_* variable; the NATS password comes only from
TOOLFLEET_NATS_PASSWORD.`)
	c.NATS.Register(fs)
	c.NATS.Name = pickerservice.ServiceName
	fs.StringVar(&c.EmbeddingsURL, "embeddings-url", os.Getenv("TOOLFLEET_EMBEDDINGS_URL"), "OpenAI-compatible server for the embedding and hybrid scorers (env TOOLFLEET_EMBEDDINGS_URL)")
	fs.StringVar(&c.EmbeddingsModel, "embeddings-model", envflag.String("TOOLFLEET_EMBEDDINGS_MODEL", "text-embedding-3-small"), "embedding model (env TOOLFLEET_EMBEDDINGS_MODEL)")
	c.EmbeddingsAPIKey = os.Getenv("TOOLFLEET_EMBEDDINGS_API_KEY") // never a flag: flags show in process lists
	fs.IntVar(&c.StreamReplicas, "stream-replicas", env.Int("TOOLFLEET_STREAM_REPLICAS", 1), "replicas of the embeddings bucket: 1 on one server, 3 in a cluster (env TOOLFLEET_STREAM_REPLICAS)")
	fs.DurationVar(&c.Timeout, "timeout", env.Duration("TOOLFLEET_PICKER_TIMEOUT", 2*time.Second), "scoring bound for requests without their own timeout (env TOOLFLEET_PICKER_TIMEOUT)")
	fs.BoolVar(&c.Learn, "learn", true, "learn from the usage stream: picks rank tools higher for requests like those they served")
	fs.BoolVar(&c.ShareUsage, "share-usage", false, "let every tenant's usage shape every tenant's picks; by default a tenant's usage shapes only its own")
	opsFlags := ops.Register(fs, ops.PickerAlias)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	errs := []error{env.Err()}
	var err error
	if c.Ops, err = opsFlags.Config(); err != nil {
		errs = append(errs, err)
	}
	if c.StreamReplicas < 1 || c.StreamReplicas > 5 {
		errs = append(errs, fmt.Errorf("-stream-replicas (TOOLFLEET_STREAM_REPLICAS): must be 1 to 5, got %d", c.StreamReplicas))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("-timeout (TOOLFLEET_PICKER_TIMEOUT): must not be negative, got %s", c.Timeout))
	}
	errs = append(errs, c.NATS.Validate())
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return c, nil
}
