package ops

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// ProbeTimeout bounds one health probe.
const ProbeTimeout = 2 * time.Second

// Probe asks the ops server listening on addr (a listen address such as ":9090") for
// /readyz and returns nil on 200, else why not. A listen address without a host, or
// with an unspecified one (0.0.0.0, ::), is reached on 127.0.0.1.
func Probe(ctx context.Context, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("ops address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	url := "http://" + net.JoinHostPort(host, port) + "/readyz"
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err // says GET, the URL and why
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// Health is the health subcommand of every program: it probes the ops server that
// -ops-addr or TOOLFLEET_OPS_ADDR (or an older name of it) says a program beside it
// listens on, and returns the exit code: 0 when ready (or after -h), else 1 with the
// reason on stderr; 2 for a bad flag or address.
func Health(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := RegisterHealth(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitConfig
	}
	return f.Health(context.Background(), stderr)
}

// RegisterHealth adds the health subcommand's one flag, -ops-addr, to fs; with every
// older variable of it, so that one `toolfleet health` serves any part's container.
func RegisterHealth(fs *flag.FlagSet) *Flags {
	return registerAddr(fs, Alias{Env: ExecutorAlias.Env}, Alias{Env: PickerAlias.Env})
}

// Health probes the ops server that the flags of [RegisterHealth] name, once parsed,
// and returns the health subcommand's exit code: 0 ready, 1 not, 2 a bad address.
func (f *Flags) Health(ctx context.Context, stderr io.Writer) int {
	c, err := f.Config()
	if err != nil {
		fmt.Fprintln(stderr, "health:", err)
		return ExitConfig
	}
	if c.Addr == "" {
		err = errors.New("the ops server is off (" + AddrEnv + "=off): nothing to ask")
	}
	if err == nil {
		err = Probe(ctx, c.Addr)
	}
	if err != nil {
		fmt.Fprintln(stderr, "health:", err)
		return ExitFailure
	}
	return ExitOK
}
