// Package nodes runs the seqd processes of a chaos test: start, kill -9,
// pause, resume and restart them (with unchanged flags), inside a network
// namespace each or on loopback, with each node's output appended to a log
// file; and asks them who leads.
package nodes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/jepsen/netns"
)

// State is what the harness last did to a node's process.
type State int

// Process states.
const (
	Down    State = iota // never started, or exited
	Running              // started (or resumed)
	Killed               // kill -9ed, not restarted yet
	Paused               // SIGSTOPped
)

func (s State) String() string {
	return [...]string{"down", "running", "killed", "paused"}[s]
}

// Node is one seqd process.
type Node struct {
	ID      string // n1, n2, ...
	Index   int    // 0-based
	NS      string // network namespace, "" on loopback
	Host    string // the node's address
	API     string // host:port
	Raft    string
	Gossip  string
	DataDir string
	LogPath string
	// DiskDir is the mount point of the node's small disk ("" if it has
	// none); DataDir is then inside it.
	DiskDir   string
	diskImage string // the ext4 image of the small disk
	mounted   bool

	bin  string
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	state  State
	starts int
	exits  []string // how earlier processes ended
	// unexpected lists processes that exited while the harness had not
	// killed or stopped them (a crash).
	unexpected []string
}

// Cluster is the set of nodes of one test.
type Cluster struct {
	Nodes []*Node
	http  *http.Client
	disk  DiskSpec
}

// Spec describes how to lay the cluster out.
type Spec struct {
	N       int
	Bin     string     // seqd binary
	DataDir string     // parent of each node's data directory
	LogDir  string     // each node logs to LogDir/<id>.log
	Net     *netns.Net // nil: loopback with free ports
	Args    []string   // extra `seqd serve` flags (timing, --unsafe-disable-lease...)
	// NodeArgs are extra flags for single nodes, by ID (after Args, so they win).
	NodeArgs map[string][]string
	// Disk gives nodes a small file system of their own for their data
	// directory (see MountDisks).
	Disk DiskSpec
}

// New lays out the nodes (it starts nothing).
func New(s Spec) (*Cluster, error) {
	c := &Cluster{http: &http.Client{Timeout: 2 * time.Second}, disk: s.Disk}
	for i := range s.N {
		n := &Node{ID: fmt.Sprintf("n%d", i+1), Index: i, bin: s.Bin}
		if s.Net != nil {
			n.NS, n.Host = s.Net.Nodes[i].NS, s.Net.Nodes[i].IP
			n.API, n.Raft, n.Gossip = n.Host+":7700", n.Host+":7701", n.Host+":7702"
		} else {
			n.Host = "127.0.0.1"
			ports, err := freePorts(3)
			if err != nil {
				return nil, err
			}
			n.API = net.JoinHostPort(n.Host, strconv.Itoa(ports[0]))
			n.Raft = net.JoinHostPort(n.Host, strconv.Itoa(ports[1]))
			n.Gossip = net.JoinHostPort(n.Host, strconv.Itoa(ports[2]))
		}
		n.DataDir = filepath.Join(s.DataDir, n.ID)
		if s.Disk.Nodes[n.ID] {
			n.DiskDir = filepath.Join(s.DataDir, n.ID+".disk")
			n.DataDir = filepath.Join(n.DiskDir, n.ID)
			if s.Disk.Kind == DiskExt4 {
				n.diskImage = filepath.Join(s.DataDir, n.ID+".disk.img")
			}
		}
		n.LogPath = filepath.Join(s.LogDir, n.ID+".log")
		c.Nodes = append(c.Nodes, n)
	}
	var joins []string
	for _, n := range c.Nodes {
		joins = append(joins, n.Gossip)
	}
	for _, n := range c.Nodes {
		n.args = append([]string{"serve", "--id", n.ID, "--data-dir", n.DataDir,
			"--api-addr", n.API, "--raft-addr", n.Raft, "--gossip-addr", n.Gossip,
			"--join", strings.Join(joins, ","), "--bootstrap-expect", strconv.Itoa(s.N)}, s.Args...)
		n.args = append(n.args, s.NodeArgs[n.ID]...)
	}
	return c, nil
}

// freePorts finds n distinct loopback ports free for both TCP and UDP
// (memberlist binds both).
func freePorts(n int) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for tries := 0; len(out) < n && tries < 200; tries++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		p := ln.Addr().(*net.TCPAddr).Port
		u, uerr := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
		ln.Close()
		if uerr != nil || seen[p] {
			continue
		}
		u.Close()
		seen[p] = true
		out = append(out, p)
	}
	if len(out) < n {
		return nil, errors.New("no free loopback ports")
	}
	return out, nil
}

// APIs returns every node's API address.
func (c *Cluster) APIs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.API)
	}
	return out
}

// ByAPI returns the node with API address addr, or nil.
func (c *Cluster) ByAPI(addr string) *Node {
	for _, n := range c.Nodes {
		if n.API == addr {
			return n
		}
	}
	return nil
}

// ByID returns the node with the given ID, or nil.
func (c *Cluster) ByID(id string) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

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

// Status is one node's view of itself, from its ClusterStatus.
type Status struct {
	Node     *Node
	Err      error
	State    string // raft state
	Term     uint64
	Serving  bool
	LeaderID string
	// RaftOpen is false while the node refuses raft traffic (not vouched
	// for yet, or never: its log says why); DiskFull while it found its
	// disk full and stands for no election.
	RaftOpen bool
	DiskFull bool
}

// Statuses asks every node for its own state, in parallel, each bounded by
// timeout.
func (c *Cluster) Statuses(ctx context.Context, timeout time.Duration) []Status {
	out := make([]Status, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = c.status(ctx, n, timeout)
		}()
	}
	wg.Wait()
	return out
}

// StatusOf asks one node for its own state, bounded by timeout.
func (c *Cluster) StatusOf(ctx context.Context, n *Node, timeout time.Duration) Status {
	return c.status(ctx, n, timeout)
}

func (c *Cluster) status(ctx context.Context, n *Node, timeout time.Duration) Status {
	st := Status{Node: n}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	admin := seqv1connect.NewAdminServiceClient(c.http, "http://"+n.API)
	r, err := admin.ClusterStatus(ctx, connect.NewRequest(&seqv1.ClusterStatusRequest{}))
	if err != nil {
		st.Err = err
		return st
	}
	st.LeaderID = r.Msg.GetLeaderId()
	st.Term = r.Msg.GetTerm()
	for _, x := range r.Msg.GetNodes() {
		if x.GetId() == n.ID {
			st.State, st.Serving = x.GetRaftState(), x.GetServing()
			st.RaftOpen, st.DiskFull = x.GetRaftOpen(), x.GetDiskFull()
			if x.GetTerm() > 0 {
				st.Term = x.GetTerm()
			}
		}
	}
	return st
}

// Leader returns the node that says it is the raft leader and serves, with
// the highest term, or nil.
func (c *Cluster) Leader(ctx context.Context) *Node {
	var best *Status
	sts := c.Statuses(ctx, time.Second)
	for i := range sts {
		s := &sts[i]
		if s.Err == nil && s.Serving && strings.EqualFold(s.State, "leader") && (best == nil || s.Term > best.Term) {
			best = s
		}
	}
	if best == nil {
		return nil
	}
	return best.Node
}

// WaitLeader polls until a node leads and serves, or timeout.
func (c *Cluster) WaitLeader(ctx context.Context, timeout time.Duration) *Node {
	deadline := time.Now().Add(timeout)
	for {
		if l := c.Leader(ctx); l != nil {
			return l
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitHealthy polls until every node answers, all name the same leader and
// term, and the leader serves; it returns a description of the last state
// seen when it gives up.
func (c *Cluster) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	return c.WaitHealthyNodes(ctx, timeout, c.Nodes)
}

// WaitHealthyNodes is WaitHealthy for some of the nodes (the others may be
// down).
func (c *Cluster) WaitHealthyNodes(ctx context.Context, timeout time.Duration, ns []*Node) error {
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		sts := make([]Status, len(ns))
		var wg sync.WaitGroup
		for i, n := range ns {
			wg.Add(1)
			go func() { defer wg.Done(); sts[i] = c.status(ctx, n, time.Second) }()
		}
		wg.Wait()
		leaders, terms := map[string]bool{}, map[uint64]bool{}
		serving := false
		var desc []string
		for _, s := range sts {
			if s.Err != nil {
				leaders["?"] = true
				desc = append(desc, fmt.Sprintf("%s: %v", s.Node.ID, s.Err))
				continue
			}
			leaders[s.LeaderID] = true
			terms[s.Term] = true
			serving = serving || (s.Serving && strings.EqualFold(s.State, "leader"))
			desc = append(desc, fmt.Sprintf("%s: %s term %d leader %q serving %v", s.Node.ID, s.State, s.Term, s.LeaderID, s.Serving))
		}
		sort.Strings(desc)
		last = strings.Join(desc, "; ")
		if len(leaders) == 1 && !leaders["?"] && !leaders[""] && len(terms) == 1 && serving {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("cluster not healthy within %v: %s", timeout, last)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Wipe deletes the node's data directory (the node must not be running):
// the node then starts as a new server with the same ID and addresses.
func (n *Node) Wipe() error {
	n.mu.Lock()
	st := n.state
	n.mu.Unlock()
	if st == Running || st == Paused {
		return fmt.Errorf("wipe %s: it is %s", n.ID, st)
	}
	return os.RemoveAll(n.DataDir)
}

// CopyData copies the node's data directory (the node must not be
// running) to dst, as an operator's `cp -a` would.
func (n *Node) CopyData(dst string) error {
	if st := n.State(); st == Running || st == Paused {
		return fmt.Errorf("copy %s: it is %s", n.ID, st)
	}
	return CopyDir(n.DataDir, dst)
}

// ReplaceData deletes the node's data directory (the node must not be
// running) and puts a copy of src in its place.
func (n *Node) ReplaceData(src string) error {
	if err := n.Wipe(); err != nil {
		return err
	}
	return CopyDir(src, n.DataDir)
}

// LogSize returns the current size of the node's log file (an offset for
// LogSince).
func (n *Node) LogSize() int64 {
	fi, err := os.Stat(n.LogPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// LogContains reports whether the node's log, from offset on, contains s.
func (n *Node) LogContains(offset int64, s string) bool {
	f, err := os.Open(n.LogPath)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		return false
	}
	b, err := io.ReadAll(f)
	return err == nil && strings.Contains(string(b), s)
}

// Member is one server as the cluster's raft configuration lists it.
type Member struct {
	ID            string
	Voter         bool // a voter (else a non-voter, or not in the configuration)
	InConfig      bool // in the raft configuration, as a voter or a non-voter
	SeenWithState bool // the cluster recorded it holding raft state
	RaftState     string
	Serving       bool
	Term          uint64 // the server's own raft term, as it answered
	Applied       uint64 // its applied index
	// RaftOpen is false while the server refuses raft traffic (seqd status
	// notes refusing-raft): not vouched for yet, or never will be (wiped,
	// an older copy, removed, taken for another cluster's member).
	RaftOpen  bool
	DiskFull  bool   // it found its disk full (seqd status notes disk-full)
	ClusterID string // the cluster its data belongs to
}

// View is the cluster's membership as one node answered it.
type View struct {
	Leader  string // "" if the answering node does not lead
	Term    uint64
	Members map[string]Member
}

// Members asks the running nodes for the raft configuration, preferring the
// answer of a node that says it leads (its configuration is the newest).
func (c *Cluster) Members(ctx context.Context, timeout time.Duration) (View, error) {
	type answer struct {
		r   *seqv1.ClusterStatusResponse
		err error
	}
	answers := make([]answer, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		if st := n.State(); st != Running {
			answers[i].err = fmt.Errorf("%s is %s", n.ID, st)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			admin := seqv1connect.NewAdminServiceClient(c.http, "http://"+n.API)
			r, err := admin.ClusterStatus(cctx, connect.NewRequest(&seqv1.ClusterStatusRequest{}))
			if err != nil {
				answers[i].err = err
				return
			}
			answers[i].r = r.Msg
		}()
	}
	wg.Wait()
	var best *seqv1.ClusterStatusResponse
	var errs []error
	for _, a := range answers {
		switch {
		case a.err != nil:
			errs = append(errs, a.err)
		case a.r.GetLeaderId() != "" && a.r.GetNodeId() == a.r.GetLeaderId():
			if best == nil || a.r.GetTerm() > best.GetTerm() || best.GetNodeId() != best.GetLeaderId() {
				best = a.r
			}
		case best == nil:
			best = a.r
		}
	}
	if best == nil {
		return View{}, fmt.Errorf("no node answered: %w", errors.Join(errs...))
	}
	out := map[string]Member{}
	for _, x := range best.GetNodes() {
		out[x.GetId()] = Member{ID: x.GetId(), Voter: x.GetVoter(), InConfig: x.GetInConfiguration() || x.GetVoter(),
			SeenWithState: x.GetSeenWithState(), RaftState: x.GetRaftState(), Serving: x.GetServing(),
			Term: x.GetTerm(), Applied: x.GetAppliedIndex(), RaftOpen: x.GetRaftOpen(), DiskFull: x.GetDiskFull(),
			ClusterID: x.GetClusterId()}
	}
	v := View{Term: best.GetTerm(), Members: out}
	if best.GetNodeId() == best.GetLeaderId() {
		v.Leader = best.GetLeaderId()
	}
	return v, nil
}

// Seqd runs the seqd binary as an operator would (e.g. `seqd node remove
// --addr A ID`), bounded by timeout, and returns its combined output. It
// runs where the harness runs (the client namespace under netns), which
// reaches every node's API.
func (c *Cluster) Seqd(ctx context.Context, timeout time.Duration, args ...string) (string, error) {
	if len(c.Nodes) == 0 {
		return "", errors.New("no nodes")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.Nodes[0].bin, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// LogSince returns the node's log from offset on.
func (n *Node) LogSince(offset int64) string {
	f, err := os.Open(n.LogPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// LogCount counts the lines of the node's log, from offset on, that
// contain s.
func (n *Node) LogCount(offset int64, s string) int {
	c := 0
	for _, line := range strings.Split(n.LogSince(offset), "\n") {
		if strings.Contains(line, s) {
			c++
		}
	}
	return c
}

// LogLines returns the lines of the node's log, from offset on, that start
// with one of prefixes (e.g. "panic: ").
func (n *Node) LogLines(offset int64, prefixes ...string) []string {
	var out []string
	for _, line := range strings.Split(n.LogSince(offset), "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}
