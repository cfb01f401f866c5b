package ops

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/rs/zerolog"
)

// The ops address's names and default.
const (
	AddrFlag    = "ops-addr"
	AddrEnv     = "TOOLFLEET_OPS_ADDR"
	DefaultAddr = ":9090"
	LevelFlag   = "log-level"
	LevelEnv    = "TOOLFLEET_LOG_LEVEL"
)

// Alias is an older name of the ops address, still read but deprecated. An empty Flag or
// Env means that form never existed.
type Alias struct {
	Flag, Env string
}

// The older names of the ops address; deployments still use them.
var (
	ExecutorAlias = Alias{Flag: "metrics-addr", Env: "TOOLFLEET_METRICS_ADDR"}
	PickerAlias   = Alias{Flag: "http", Env: "TOOLFLEET_PICKER_HTTP"}
)

// Config is what every program configures the same way.
type Config struct {
	// Addr is the ops server's listen address; empty when it is off.
	Addr string
	// LogLevel is the level of the program's logs. The zero value is debug: take a
	// Config from [Flags.Config], which defaults to info.
	LogLevel zerolog.Level
	// LogTo receives the logs. Default os.Stderr.
	LogTo io.Writer
	// Deprecated are warnings about older setting names in use, logged once by Logger.
	Deprecated []string
}

// Logger returns the program's logger at the configured level, after warning once about
// each deprecated setting in use.
func (c Config) Logger(service string) zerolog.Logger {
	w := c.LogTo
	if w == nil {
		w = os.Stderr
	}
	log := NewLogger(w, service, c.LogLevel)
	for _, d := range c.Deprecated {
		log.Warn().Msg(d)
	}
	return log
}

// Flags are the ops settings registered on a program's flag set.
type Flags struct {
	fs      *flag.FlagSet
	aliases []Alias
	addr    setting
	level   setting
	old     map[string]*setting // alias flag name -> its value
	// withLevel is false for the health subcommand, which only reads the address.
	withLevel bool
}

// setting is a string flag that knows whether it was given, whichever parser set it:
// the flag package, or pflag (toolfleet's cobra commands), which does not tell the flag
// set. A given flag wins over its variable.
type setting struct {
	value string
	given bool
}

func (s *setting) String() string {
	if s == nil { // the flag package's zero-value check
		return ""
	}
	return s.value
}

func (s *setting) Set(v string) error {
	s.value, s.given = v, true
	return nil
}

// Register adds -ops-addr, -log-level and the aliases' flags to fs.
func Register(fs *flag.FlagSet, aliases ...Alias) *Flags {
	f := registerAddr(fs, aliases...)
	f.withLevel = true
	fs.Var(&f.level, LevelFlag, "the `level` of the logs: debug, info, warn or error (env "+LevelEnv+")")
	return f
}

// registerAddr adds -ops-addr and the aliases' flags to fs; the level stays info.
func registerAddr(fs *flag.FlagSet, aliases ...Alias) *Flags {
	f := &Flags{fs: fs, aliases: aliases, addr: setting{value: DefaultAddr}, level: setting{value: "info"},
		old: map[string]*setting{}}
	fs.Var(&f.addr, AddrFlag, "listen `address` of /metrics, /healthz and /readyz, or \"off\" (env "+AddrEnv+")")
	for _, a := range aliases {
		if a.Flag != "" {
			f.old[a.Flag] = &setting{}
			fs.Var(f.old[a.Flag], a.Flag, "deprecated: use -"+AddrFlag)
		}
	}
	return f
}

// Config reads the settings once fs is parsed: a flag, else its variable, else the
// default; a new name wins over an older one. Arguments left after the flags are an
// error: every setting of a program is a flag.
func (f *Flags) Config() (Config, error) {
	if f.fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments %q; every setting is a flag", f.fs.Args())
	}
	var c Config
	addr, from := f.addrSetting(&c)
	var err error
	if c.Addr, err = parseAddr(addr, from); err != nil {
		return Config{}, err
	}
	level, from := f.level.value, "-"+LevelFlag
	if v := os.Getenv(LevelEnv); f.withLevel && !f.level.given && v != "" {
		level, from = v, LevelEnv
	}
	if c.LogLevel, err = parseLevel(level, from); err != nil {
		return Config{}, err
	}
	return c, nil
}

// addrSetting returns the ops address and the name of the setting that gave it,
// recording a deprecated name in c.
func (f *Flags) addrSetting(c *Config) (value, from string) {
	deprecated := func(name string) {
		c.Deprecated = append(c.Deprecated, fmt.Sprintf("%s is deprecated: use -%s or %s", name, AddrFlag, AddrEnv))
	}
	if f.addr.given {
		return f.addr.value, "-" + AddrFlag
	}
	for _, a := range f.aliases {
		if a.Flag != "" && f.old[a.Flag].given {
			deprecated("-" + a.Flag)
			return f.old[a.Flag].value, "-" + a.Flag
		}
	}
	if v := os.Getenv(AddrEnv); v != "" {
		return v, AddrEnv
	}
	for _, a := range f.aliases {
		if v := os.Getenv(a.Env); a.Env != "" && v != "" {
			deprecated(a.Env)
			return v, a.Env
		}
	}
	return DefaultAddr, "-" + AddrFlag
}

// parseAddr checks a listen address; "off" and an explicit empty value turn the server
// off.
func parseAddr(v, from string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "off" || v == "" {
		return "", nil
	}
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return "", fmt.Errorf("%s %q: want host:port, :port or off", from, v)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("%s %q: port %q is not a number from 0 to 65535", from, v, port)
	}
	return v, nil
}

func parseLevel(v, from string) (zerolog.Level, error) {
	lvl, err := zerolog.ParseLevel(strings.ToLower(strings.TrimSpace(v)))
	if err != nil || lvl == zerolog.NoLevel {
		return 0, fmt.Errorf("%s %q: use debug, info, warn or error", from, v)
	}
	return lvl, nil
}

// Usage makes fs's usage (-h, help, a bad flag) say what the program is before its
// flags: "Usage: NAME [flags]", then about, a paragraph (what it does, and what the
// environment gives it that no flag does), then the flags. Each program sets it, so
// that -h never prints flags alone.
func Usage(fs *flag.FlagSet, about string) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: %s [flags]\n       %s health | version | help\n\n%s\n\nFlags:\n", fs.Name(), fs.Name(), strings.TrimSpace(about))
		fs.PrintDefaults()
	}
}
