package nodes

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seqd/seqd/jepsen/netns"
)

// CommandLine returns the node's command line (for logs and the results).
func (n *Node) CommandLine() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.commandLine(n.args)
}

func (n *Node) commandLine(args []string) []string {
	argv := append([]string{n.bin}, args...)
	if n.NS != "" {
		argv = netns.Exec(n.NS, argv...)
	}
	return argv
}

// Args returns the node's usual `seqd serve` arguments.
func (n *Node) Args() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.args...)
}

// SetFlag changes one flag of the node's usual arguments (see SetFlag),
// for its next starts; a running process keeps its flags until restarted.
func (n *Node) SetFlag(name, value string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.args = SetFlag(n.args, name, value)
}

// State returns what the harness last did to the node.
func (n *Node) State() State {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state
}

// Start starts the node's process (again, with the same flags). Its output
// is appended to its log file.
func (n *Node) Start() error { return n.StartWith(nil) }

// StartWith starts the node's process with args instead of its usual
// `seqd serve` arguments (nil: the usual ones), for this start only.
func (n *Node) StartWith(args []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state == Running || n.state == Paused {
		return nil
	}
	if args == nil {
		args = n.args
	}
	if err := os.MkdirAll(n.DataDir, 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	n.starts++
	argv := n.commandLine(args)
	fmt.Fprintf(logf, "=== jepsen: start #%d at %s: %s\n", n.starts, time.Now().Format(time.RFC3339Nano), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so that a ^C at the terminal reaches only the
	// harness (which then stops the nodes itself); and killed if the
	// harness dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", n.ID, err)
	}
	done := make(chan struct{})
	n.cmd, n.done, n.state = cmd, done, Running
	go func() {
		err := cmd.Wait()
		n.mu.Lock()
		how := "exit 0"
		if err != nil {
			how = err.Error()
		}
		n.exits = append(n.exits, how)
		if n.cmd == cmd && n.state == Running {
			n.state = Down // it exited on its own: a crash
			n.unexpected = append(n.unexpected, fmt.Sprintf("process #%d (pid %d) exited on its own at %s: %s",
				n.starts, cmd.Process.Pid, time.Now().Format(time.RFC3339Nano), how))
		}
		n.mu.Unlock()
		close(done)
	}()
	return nil
}

// Pid returns the process id of the node's current process, or 0.
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil || n.state == Down || n.state == Killed {
		return 0
	}
	return n.cmd.Process.Pid
}

// Kill sends SIGKILL and waits (bounded) until the process is gone.
func (n *Node) Kill() error {
	n.mu.Lock()
	cmd, done, st := n.cmd, n.done, n.state
	if st == Running || st == Paused {
		n.state = Killed
	}
	n.mu.Unlock()
	if cmd == nil || cmd.Process == nil || (st != Running && st != Paused) {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not die within 10s of SIGKILL", n.ID, cmd.Process.Pid)
	}
}

// Pause sends SIGSTOP.
func (n *Node) Pause() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state != Running {
		return fmt.Errorf("%s is %s, not running", n.ID, n.state)
	}
	if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	n.state = Paused
	return nil
}

// Resume sends SIGCONT to a paused node.
func (n *Node) Resume() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state != Paused {
		return nil
	}
	n.state = Running
	return n.cmd.Process.Signal(syscall.SIGCONT)
}

// Stop ends the process gracefully (SIGCONT, SIGTERM); if it has not exited
// within timeout, it sends SIGQUIT (a Go process dumps its goroutines to its
// log) and then SIGKILL.
func (n *Node) Stop(timeout time.Duration) error {
	n.mu.Lock()
	cmd, done, st := n.cmd, n.done, n.state
	if st == Running || st == Paused {
		n.state = Down
	}
	n.mu.Unlock()
	if cmd == nil || cmd.Process == nil || (st != Running && st != Paused) {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
	}
	// SIGQUIT makes a Go process write every goroutine's stack to its log
	// (and exit): the evidence of where it hung.
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-done:
		return fmt.Errorf("%s did not stop within %v of SIGTERM; SIGQUIT (goroutine dump in %s)", n.ID, timeout, n.LogPath)
	case <-time.After(3 * time.Second):
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
		return fmt.Errorf("%s did not stop within %v of SIGTERM; killed", n.ID, timeout)
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not die", n.ID, cmd.Process.Pid)
	}
}

// Exits describes how the node's earlier processes ended.
func (n *Node) Exits() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.exits...)
}

// Unexpected describes processes of the node that exited without the
// harness killing or stopping them.
func (n *Node) Unexpected() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.unexpected...)
}

// Starts returns how many times the node was started.
func (n *Node) Starts() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.starts
}

// StopAll stops every node (in parallel).
func (c *Cluster) StopAll(timeout time.Duration) error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.Nodes))
	for i, n := range c.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = n.Stop(timeout) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// KillAll kills every node at once.
func (c *Cluster) KillAll() error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.Nodes))
	for i, n := range c.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = n.Kill() }()
	}
	wg.Wait()
	return errors.Join(errs...)
}
