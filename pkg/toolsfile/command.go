package toolsfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/toolfleet/toolfleet/pkg/sandbox"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// ExitError is the cause (reachable with errors.As) of the tool_error a command that
// exits with a non-zero code produces.
type ExitError struct {
	// ExitCode is the process's exit code, or -1 when a signal ended it.
	ExitCode int
	// Stderr is the end of what the process wrote to stderr, at most 2 KiB.
	Stderr string
}

// ProcessExitCode is the exit code, for retry rules ([tools.ExitCodeOf]).
func (e *ExitError) ProcessExitCode() int { return e.ExitCode }

func (e *ExitError) Error() string {
	if e.Stderr == "" {
		return fmt.Sprintf("exit code %d", e.ExitCode)
	}
	return fmt.Sprintf("exit code %d: %s", e.ExitCode, e.Stderr)
}

// run starts the process with args on its stdin (a file holding them whole, see
// sealedFile) and reads its output. A non-zero exit is tool_error (retried by default:
// a program may fail for passing reasons); a timeout kills the whole process group and
// is timeout; stdout larger than the limit is tool_error_permanent.
func (c *Command) run(ctx context.Context, tool string, secrets []tools.Secret, args json.RawMessage) (any, error) {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return nil, tools.Errorf(tools.CodeInvalidDefinition, "tool %s: command has no argv", tool)
	}
	timeout := timeoutOr(c.Timeout)
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var cmd *exec.Cmd
	var stdout *limitBuffer
	var stderr *tailBuffer
	var errLines *progressWriter
	env, err := c.environ(ctx, tool, secrets)
	if err != nil {
		return nil, err
	}
	// The whole input is in a file before the program starts: it never reads a cut one,
	// whatever becomes of the executor.
	stdin, closeStdin, err := sealedFile("toolfleet-input", args)
	if err != nil {
		return nil, tools.Wrap(tools.CodeToolFailed, err, fmt.Sprintf("tool %s: prepare the input: %v", tool, err))
	}
	defer closeStdin()
	rcFile, closeRC, err := runContextFile(ctx, tool) // only for a tool that asked (runcontext.go)
	if err != nil {
		return nil, err
	}
	defer closeRC()
	var extra []*os.File
	if rcFile != nil {
		env = append(env, RunContextEnv+"="+runContextPath)
		extra = []*os.File{rcFile}
	}
	// The parent-death signal belongs to the thread that starts the process: this
	// goroutine keeps it until the process has been waited for (procattr_linux.go).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// "text file busy": the program was being written when another process forked (its
	// copy of the write descriptor lives until that child execs). It passes in a moment.
	for try := range 4 {
		if cmd, err = c.command(runCtx); err != nil {
			return nil, tools.Wrap(tools.CodeToolFailedPermanent, err, fmt.Sprintf("tool %s: cannot start %s: %v", tool, c.Argv[0], err))
		}
		cmd.Dir = c.Dir
		cmd.Env = env
		cmd.Stdin = stdin
		cmd.ExtraFiles = extra
		stdout = &limitBuffer{max: limitOr(c.MaxOutputBytes)}
		stderr = &tailBuffer{max: stderrTailBytes}
		errLines = &progressWriter{ctx: ctx, out: stderr}
		cmd.Stdout, cmd.Stderr = stdout, errLines
		// The process gets its own group so that a timeout kills what it started too (a
		// shell's children), and dies with the executor; WaitDelay stops Wait from
		// hanging on pipes a stray grandchild still holds. A sandboxed command switches
		// user in the launcher (its policy's RunAs).
		var as *sandbox.User
		if c.policy == nil {
			as = c.RunAs
		}
		startInGroup(cmd, as)
		cmd.WaitDelay = time.Second
		if err = cmd.Start(); !errors.Is(err, syscall.ETXTBSY) {
			break
		}
		time.Sleep(time.Duration(try+1) * 20 * time.Millisecond)
	}
	if err != nil {
		return nil, tools.Wrap(tools.CodeToolFailed, err, fmt.Sprintf("tool %s: cannot start %s: %v", tool, c.Argv[0], err))
	}
	// The command holds its own descriptors now: the executor's go, so that no one
	// finds the input or the run context among the executor's open files.
	closeStdin()
	closeRC()
	// What the command starts dies with the executor too, SIGKILL included.
	release, err := guardGroup(cmd)
	if err != nil {
		killGroup(cmd)
		_ = cmd.Wait() // killed just above: its end says nothing more
		return nil, tools.Wrap(tools.CodeToolFailed, err, fmt.Sprintf("tool %s: %v; the command was killed", tool, err))
	}
	err = cmd.Wait()
	errLines.flush()
	// Whatever happened, nothing the command started outlives the call.
	killGroup(cmd)
	release()

	if runCtx.Err() != nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, tools.Wrap(tools.CodeCanceled, ctx.Err(), fmt.Sprintf("tool %s: canceled; the command's process group was killed", tool))
		}
		if ctx.Err() != nil { // the call's own deadline came first
			return nil, tools.Wrap(tools.CodeTimeout, ctx.Err(), fmt.Sprintf("tool %s: the call's deadline passed; the command's process group was killed", tool))
		}
		return nil, tools.Wrap(tools.CodeTimeout, runCtx.Err(), fmt.Sprintf("tool %s: command timed out after %s; its process group was killed", tool, timeout))
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		ee := &ExitError{ExitCode: exitErr.ExitCode(), Stderr: stderr.String()}
		msg := fmt.Sprintf("tool %s: command exited with code %d", tool, ee.ExitCode)
		if ee.ExitCode < 0 {
			msg = fmt.Sprintf("tool %s: command was killed (%s)", tool, exitErr.ProcessState)
		}
		if ee.Stderr != "" {
			msg += "; stderr: " + ee.Stderr
		}
		return nil, &tools.Error{Code: tools.CodeToolFailed, Message: msg, Err: ee}
	}
	if err != nil {
		return nil, tools.Wrap(tools.CodeToolFailed, err, fmt.Sprintf("tool %s: command: %v", tool, err))
	}
	if stdout.overflow {
		return nil, tools.Errorf(tools.CodeToolFailedPermanent, "tool %s: command wrote more than %d bytes to stdout", tool, stdout.max)
	}
	return outputValue(stdout.buf.Bytes()), nil
}

// command is the process that runs the tool: its program directly, or through the
// sandbox launcher when the tool runs sandboxed.
func (c *Command) command(ctx context.Context) (*exec.Cmd, error) {
	if c.policy == nil {
		return exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...), nil
	}
	return sandbox.Command(ctx, *c.policy, c.Argv[0], c.Argv[1:]...)
}

// environ is the process's whole environment: the passed-through variables, the fixed
// ones, the tool's secrets (from ctx, where the executor put them), and TOOLFLEET_TOOL,
// TOOLFLEET_CALL_ID, TOOLFLEET_RUN_ID and TOOLFLEET_ATTEMPT so that a program can make
// its side effects idempotent per call.
func (c *Command) environ(ctx context.Context, tool string, secrets []tools.Secret) ([]string, error) {
	env := processEnv(c.PassEnv, c.Env)
	for _, s := range secrets {
		v, ok := tools.SecretFrom(ctx, s.Name)
		if !ok {
			return nil, tools.Errorf(tools.CodeInvalidDefinition,
				"tool %s: secret %s is not available (the executor resolves the secrets a tool declares)", tool, s.Name)
		}
		env[s.Name] = v
	}
	delete(env, RunContextEnv) // set by run for a tool that asked, never passed through
	env["TOOLFLEET_TOOL"] = tool
	if info, ok := tools.CallInfoFrom(ctx); ok {
		env["TOOLFLEET_CALL_ID"] = info.CallID
		env["TOOLFLEET_RUN_ID"] = info.RunID
		env["TOOLFLEET_ATTEMPT"] = strconv.Itoa(info.Attempt)
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// processEnv is the environment a started process gets before secrets and toolfleet's
// own variables: the executor's variables named in pass, then env.
func processEnv(pass []string, env map[string]string) map[string]string {
	out := make(map[string]string, len(pass)+len(env))
	for _, name := range pass {
		if v, ok := os.LookupEnv(name); ok {
			out[name] = v
		}
	}
	maps.Copy(out, env)
	return out
}
