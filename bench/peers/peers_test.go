package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The table's p50 and p99 are nearest-rank quantiles: of 1..100 ms, 50 and 99 ms;
// of one run, that run.
func TestQuantile(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	for q, want := range map[float64]time.Duration{0.5: 50 * time.Millisecond, 0.99: 99 * time.Millisecond, 1: 100 * time.Millisecond} {
		if got := quantile(lat, q); got != want {
			t.Errorf("quantile(1..100ms, %v) = %v, want %v", q, got, want)
		}
	}
	if got := quantile(lat[:1], 0.99); got != time.Millisecond {
		t.Errorf("p99 of one run = %v, want that run", got)
	}
	if got := median([]float64{3, 1, 2, 10}); got != 2.5 {
		t.Errorf("median of 3,1,2,10 = %v, want 2.5", got)
	}
}

// A command name with spaces and parentheses does not shift the fields read after it.
func TestParseStat(t *testing.T) {
	line := "4242 (a (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 5 7 11 13 20 0 1 0 100 0 0\n"
	ppid, ticks, err := parseStat(line)
	if err != nil || ppid != 17 || ticks != 5+7+11+13 {
		t.Fatalf("parseStat = %d, %d, %v; want 17, 36, nil", ppid, ticks, err)
	}
	if _, _, err := parseStat("4242 (cut"); err == nil {
		t.Error("a line without the end of its name parsed")
	}
}

// The CPU of a system counts what its processes' children burnt, also once they have
// exited, as PostgreSQL's backends do: here a child that counts to 300,000 and exits,
// after which its parent becomes sleep (so /proc shows when the child is done).
func TestCPUOfCountsChildren(t *testing.T) {
	dir := t.TempDir()
	script := `sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'; exec sleep 60`
	p, err := startProc("burner", dir, os.Environ(), "sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop(syscall.SIGTERM, 5*time.Second)
	comm := fmt.Sprintf("/proc/%d/comm", p.cmd.Process.Pid)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(time.Minute)
	for {
		b, err := os.ReadFile(comm)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(b)) == "sleep" {
			break
		}
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatal("the child has not finished counting after a minute")
		}
	}
	cpu, err := cpuOf([]*proc{p})
	if err != nil {
		t.Fatal(err)
	}
	if cpu < 100*time.Millisecond {
		t.Fatalf("CPU of the process once its child has exited: %v, want the child's (at least 100ms)", cpu)
	}
}

// -quick shortens what it is not told otherwise; bad values are refused by name.
func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"-quick", "-rounds", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Rounds != 2 || c.Cell != time.Second || c.Warmup != 300*time.Millisecond {
		t.Errorf("-quick -rounds 2: rounds %d, cell %s, warm-up %s; want 2, 1s, 300ms", c.Rounds, c.Cell, c.Warmup)
	}
	if len(c.Systems) != 4 || len(c.Durability) != 2 {
		t.Errorf("defaults: systems %v, durability %v; want all", c.Systems, c.Durability)
	}
	for _, args := range [][]string{{"-systems", "toolfleet,river"}, {"-durability", ""}, {"-rounds", "0"}, {"-dbos-poll", "0s"}} {
		if _, err := parseFlags(args, io.Discard); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "-")) {
			t.Errorf("%v: error %v, want one naming %s", args, err, args[0])
		}
	}
}

// toolfleet's script is the same run as the others' modelTurn: steps calls of echo,
// each with arguments of its own, then the answer "done".
func TestScriptsMatch(t *testing.T) {
	s := toolfleetScript(2)
	for _, want := range []string{"{value: step 1}", "{value: step 2}", "text: done"} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
	if r := modelTurn(1, 2); r.Arguments != `{"value":"step 2"}` {
		t.Errorf("modelTurn(1, 2) = %+v", r)
	}
	if r := modelTurn(2, 2); r.Text != "done" || r.Tool != "" {
		t.Errorf("modelTurn(2, 2) = %+v, want the answer", r)
	}
}
