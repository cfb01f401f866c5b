// Package natsconn connects toolfleet's binaries to NATS the same way: URL, credentials
// and TLS from flags or TOOLFLEET_* environment variables, and a connection that
// reconnects forever, so a NATS restart or a rolling upgrade is survived.
package natsconn

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/envflag"
)

// Config says how to reach NATS.
type Config struct {
	// URL is one or more comma-separated server URLs. Env TOOLFLEET_NATS_URL; default
	// nats://127.0.0.1:4222.
	URL string
	// CredsFile is a NATS credentials file (JWT + seed). Env TOOLFLEET_NATS_CREDS.
	CredsFile string
	// User and Password authenticate with a user name and password. Env
	// TOOLFLEET_NATS_USER, TOOLFLEET_NATS_PASSWORD.
	User, Password string
	// TLSCert and TLSKey are a client certificate for mutual TLS; TLSCA verifies the
	// server. Env TOOLFLEET_NATS_TLS_CERT, TOOLFLEET_NATS_TLS_KEY, TOOLFLEET_NATS_TLS_CA.
	TLSCert, TLSKey, TLSCA string
	// Name is the client name servers show in their monitoring.
	Name string
}

// Register adds the -nats-* flags to fs, with defaults from the environment.
func (c *Config) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.URL, "nats-url", envflag.String("TOOLFLEET_NATS_URL", nats.DefaultURL), "NATS server URL(s), comma-separated (env TOOLFLEET_NATS_URL)")
	fs.StringVar(&c.CredsFile, "nats-creds", os.Getenv("TOOLFLEET_NATS_CREDS"), "NATS credentials file (env TOOLFLEET_NATS_CREDS)")
	fs.StringVar(&c.User, "nats-user", os.Getenv("TOOLFLEET_NATS_USER"), "NATS user (env TOOLFLEET_NATS_USER)")
	c.Password = os.Getenv("TOOLFLEET_NATS_PASSWORD") // never a flag: flags show in process lists
	fs.StringVar(&c.TLSCert, "nats-tls-cert", os.Getenv("TOOLFLEET_NATS_TLS_CERT"), "client certificate for NATS mutual TLS (env TOOLFLEET_NATS_TLS_CERT)")
	fs.StringVar(&c.TLSKey, "nats-tls-key", os.Getenv("TOOLFLEET_NATS_TLS_KEY"), "client key for NATS mutual TLS (env TOOLFLEET_NATS_TLS_KEY)")
	fs.StringVar(&c.TLSCA, "nats-tls-ca", os.Getenv("TOOLFLEET_NATS_TLS_CA"), "CA certificate that signs the NATS server's certificate (env TOOLFLEET_NATS_TLS_CA)")
}

// Validate checks that the settings go together and the files they name exist.
func (c Config) Validate() error {
	if c.URL == "" {
		return fmt.Errorf("nats: no server URL (set -nats-url or TOOLFLEET_NATS_URL)")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("nats: give both a TLS certificate and its key, or neither")
	}
	if c.CredsFile != "" && c.User != "" {
		return fmt.Errorf("nats: use either a credentials file or a user and password, not both")
	}
	for what, path := range map[string]string{"credentials file": c.CredsFile, "TLS certificate": c.TLSCert,
		"TLS key": c.TLSKey, "TLS CA": c.TLSCA} {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("nats: %s: %w", what, err)
		}
	}
	return nil
}

// Options returns the nats.go options for c: authentication, TLS, and reconnecting
// forever with the connection events logged: a lost connection once, failed tries at
// growing intervals (the first, then after 5s, 10s, 20s, … at most 5m apart), the
// recovery with the tries and time it took; a connection closed on purpose, nothing.
func (c Config) Options(log zerolog.Logger) []nats.Option {
	return c.options(newOutage(log), log)
}

func (c Config) options(o *outage, log zerolog.Logger) []nats.Option {
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(o.disconnected),
		nats.ReconnectHandler(func(nc *nats.Conn) { o.connected(nc.ConnectedUrlRedacted(), "reconnected to NATS") }),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) { o.failed(c.URL, err) }),
		LogErrors(log),
	}
	if c.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.TLSCert != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	return opts
}

// Connect validates c and connects. A server that is down (or restarting) when the part
// starts is waited for: the connection keeps trying, every failed try logged, and the
// part's own setup waits for it (see jsutil.RetrySetup). A URL that cannot be parsed
// fails at once; after the first connection, it reconnects forever. Failed tries are
// logged as [Config.Options] says.
func (c Config) Connect(log zerolog.Logger, extra ...nats.Option) (*nats.Conn, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	o := newOutage(log)
	opts := append(c.options(o, log), nats.RetryOnFailedConnect(true),
		nats.ConnectHandler(func(nc *nats.Conn) { o.connected(nc.ConnectedUrlRedacted(), "connected to NATS") }))
	nc, err := nats.Connect(c.URL, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("nats: connect to %s: %w", c.URL, err)
	}
	return nc, nil
}

// LogErrors is the nats.go option that sends asynchronous errors (a permission refused, a
// slow consumer) to log. nats.go prints them as plain text on stderr by default, which
// breaks a JSON log.
func LogErrors(log zerolog.Logger) nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
		ev := log.Warn().Err(err)
		if sub != nil {
			ev = ev.Str("subject", sub.Subject)
		}
		ev.Msg("NATS error")
	})
}
