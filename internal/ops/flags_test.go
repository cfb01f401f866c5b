package ops

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
)

// clearEnv empties the variables these tests read (t.Setenv: not parallel).
func clearEnv(t *testing.T) {
	t.Helper()
	for _, name := range []string{AddrEnv, LevelEnv, ExecutorAlias.Env, PickerAlias.Env} {
		t.Setenv(name, "")
	}
}

func parse(t *testing.T, args []string, aliases ...Alias) (Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := Register(fs, aliases...)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	return f.Config()
}

func TestFlagsConfig(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		addr       string
		level      zerolog.Level
		deprecated string
	}{
		{"defaults", nil, nil, ":9090", zerolog.InfoLevel, ""},
		{"variables", map[string]string{AddrEnv: "127.0.0.1:9191", LevelEnv: "WARN"}, nil, "127.0.0.1:9191", zerolog.WarnLevel, ""},
		{"flags over variables", map[string]string{AddrEnv: ":9191", LevelEnv: "warn"}, []string{"-ops-addr", ":9292", "-log-level", "debug"}, ":9292", zerolog.DebugLevel, ""},
		{"off", map[string]string{AddrEnv: "off"}, nil, "", zerolog.InfoLevel, ""},
		{"explicit empty is off", nil, []string{"-ops-addr", ""}, "", zerolog.InfoLevel, ""},
		{"old flag", nil, []string{"-metrics-addr", ":9393"}, ":9393", zerolog.InfoLevel, "-metrics-addr is deprecated"},
		{"old variable", map[string]string{"TOOLFLEET_PICKER_HTTP": ":9494"}, nil, ":9494", zerolog.InfoLevel, "TOOLFLEET_PICKER_HTTP is deprecated"},
		{"new variable over old one", map[string]string{"TOOLFLEET_PICKER_HTTP": ":9494", AddrEnv: ":9595"}, nil, ":9595", zerolog.InfoLevel, ""},
		{"new flag over old flag", nil, []string{"-http", ":9393", "-ops-addr", ":9696"}, ":9696", zerolog.InfoLevel, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			c, err := parse(t, tt.args, ExecutorAlias, PickerAlias)
			if err != nil {
				t.Fatal(err)
			}
			if c.Addr != tt.addr || c.LogLevel != tt.level {
				t.Errorf("addr %q level %s, want %q and %s", c.Addr, c.LogLevel, tt.addr, tt.level)
			}
			if got := strings.Join(c.Deprecated, "; "); (tt.deprecated == "") != (got == "") || !strings.Contains(got, tt.deprecated) {
				t.Errorf("deprecation warnings %q, want %q", got, tt.deprecated)
			}
		})
	}
}

// toolfleet's cobra commands parse these flags with pflag (AddGoFlagSet), which does not
// tell the flag set what it set: a given flag still wins over its variable, and an old
// name still warns.
func TestFlagsParsedByPflag(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		addr  string
		level zerolog.Level
		warns bool
	}{
		{nil, ":9191", zerolog.WarnLevel, false},
		{[]string{"--ops-addr", ":9292", "--log-level=debug"}, ":9292", zerolog.DebugLevel, false},
		{[]string{"--metrics-addr", ":9393"}, ":9393", zerolog.WarnLevel, true},
	} {
		clearEnv(t)
		t.Setenv(LevelEnv, "warn")
		if !tc.warns {
			t.Setenv(AddrEnv, ":9191")
		}
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		f := Register(fs, ExecutorAlias)
		pfs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		pfs.AddGoFlagSet(fs)
		if err := pfs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		c, err := f.Config()
		if err != nil || c.Addr != tc.addr || c.LogLevel != tc.level || (len(c.Deprecated) > 0) != tc.warns {
			t.Errorf("%q: %+v %v; want %s, %s, deprecation warned %v", tc.args, c, err, tc.addr, tc.level, tc.warns)
		}
	}
}

// Every error names the setting the bad value came from.
func TestFlagsConfigRefuses(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		aliases []Alias
		want    string
	}{
		{"address without a port", nil, []string{"-ops-addr", "9090"}, nil, `-ops-addr "9090": want host:port`},
		{"port out of range", map[string]string{AddrEnv: ":70000"}, nil, nil, `TOOLFLEET_OPS_ADDR ":70000": port "70000" is not a number`},
		{"bad old flag", nil, []string{"-metrics-addr", "x"}, []Alias{ExecutorAlias}, `-metrics-addr "x"`},
		{"bad old variable", map[string]string{"TOOLFLEET_METRICS_ADDR": "x"}, nil, []Alias{ExecutorAlias}, `TOOLFLEET_METRICS_ADDR "x"`},
		{"bad level", nil, []string{"-log-level", "loud"}, nil, `-log-level "loud": use debug, info, warn or error`},
		{"bad level variable", map[string]string{LevelEnv: "loud"}, nil, nil, `TOOLFLEET_LOG_LEVEL "loud"`},
		{"old flag of another part", nil, []string{"-metrics-addr", ":1"}, []Alias{PickerAlias}, "flag provided but not defined: -metrics-addr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := parse(t, tt.args, tt.aliases...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to say %q", err, tt.want)
			}
		})
	}
}
