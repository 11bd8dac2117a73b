package testenv

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is a child process that dies with the process that started it (PR_SET_PDEATHSIG):
// the control planes' helpers and the agent processes of tests and the demo.
type Process struct {
	// Cmd is the started command.
	Cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartProcess starts path with args, extra environment variables and its output (stdout and
// stderr) to out. onExit, when set, runs after the process has exited (to close out).
func StartProcess(path string, args, env []string, out io.Writer, onExit func()) (*Process, error) {
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		if onExit != nil {
			onExit()
		}
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Alive reports whether the process is still running.
func (p *Process) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Stop sends sig and waits for the exit, killing the process after grace. It is a no-op for an
// exited process.
func (p *Process) Stop(sig syscall.Signal, grace time.Duration) {
	if !p.Alive() {
		return
	}
	_ = p.Cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.Cmd.Process.Kill()
		<-p.done
	}
}
