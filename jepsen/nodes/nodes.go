// Package nodes runs the seqd processes of a chaos test: start, kill -9,
// pause, resume and restart them (with unchanged flags), inside a network
// namespace each or on loopback, with each node's output appended to a log
// file; and asks them who leads.
package nodes

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

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
	// ClockPath is the node's clock offset file (see SetClockOffset).
	ClockPath string

	bin  string
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	state  State
	starts int
	exits  []string // how earlier processes ended
	// clockOffset is the offset last written to ClockPath.
	clockOffset time.Duration
	// unexpected lists processes that exited while the harness had not
	// killed or stopped them (a crash).
	unexpected []string
}

// Cluster is the set of nodes of one test.
type Cluster struct {
	Nodes []*Node
	http  *http.Client
	disk  DiskSpec
	// spare is the network slot of servers that are not among Nodes (see
	// Spare), and extra the nodes made on it.
	spare *Node
	mu    sync.Mutex
	extra []*Node
	base  Spec
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
	// Spare lays out one more network slot (a namespace and addresses
	// under netns: Net must have N+1 nodes) for servers that are not
	// among the cluster's nodes (see Spare).
	Spare bool
}

// New lays out the nodes (it starts nothing).
func New(s Spec) (*Cluster, error) {
	c := &Cluster{http: &http.Client{Timeout: 2 * time.Second}, disk: s.Disk, base: s}
	if s.Net != nil && len(s.Net.Nodes) < s.N+btoi(s.Spare) {
		return nil, fmt.Errorf("the network has %d node namespaces, %d needed", len(s.Net.Nodes), s.N+btoi(s.Spare))
	}
	if s.Spare {
		c.spare = &Node{Index: s.N}
		if err := place(c.spare, s.Net); err != nil {
			return nil, err
		}
	}
	for i := range s.N {
		n := &Node{ID: fmt.Sprintf("n%d", i+1), Index: i, bin: s.Bin}
		if err := place(n, s.Net); err != nil {
			return nil, err
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
		n.ClockPath = clockPath(s.DataDir, n.ID)
		c.Nodes = append(c.Nodes, n)
	}
	var joins []string
	for _, n := range c.Nodes {
		joins = append(joins, n.Gossip)
	}
	for _, n := range c.Nodes {
		n.args = append([]string{"serve", "--id", n.ID, "--data-dir", n.DataDir,
			"--api-addr", n.API, "--raft-addr", n.Raft, "--gossip-addr", n.Gossip,
			"--join", strings.Join(joins, ","), "--bootstrap-expect", strconv.Itoa(s.N), "--" + ClockFlag, n.ClockPath}, s.Args...)
		n.args = append(n.args, s.NodeArgs[n.ID]...)
	}
	return c, nil
}

// place gives node n its namespace and addresses: under netns those of
// namespace n.Index, on loopback free ports.
func place(n *Node, nt *netns.Net) error {
	if nt != nil {
		n.NS, n.Host = nt.Nodes[n.Index].NS, nt.Nodes[n.Index].IP
		n.API, n.Raft, n.Gossip = n.Host+":7700", n.Host+":7701", n.Host+":7702"
		return nil
	}
	n.Host = "127.0.0.1"
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	n.API = net.JoinHostPort(n.Host, strconv.Itoa(ports[0]))
	n.Raft = net.JoinHostPort(n.Host, strconv.Itoa(ports[1]))
	n.Gossip = net.JoinHostPort(n.Host, strconv.Itoa(ports[2]))
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// SpareAPI returns the API address of the spare slot ("" without one):
// clients may name it from the start, for the servers Spare makes.
func (c *Cluster) SpareAPI() string {
	if c.spare == nil {
		return ""
	}
	return c.spare.API
}

// Spare makes a server that is not one of the cluster's nodes, on the
// spare slot (its namespace and addresses; one such server runs at a
// time): ID id, its own data directory and log, the run's flags, and args
// instead of the nodes' --join and --bootstrap-expect (for example the
// old servers' gossip addresses for a restored server). It starts
// nothing. The nodes it made are in Extra.
func (c *Cluster) Spare(id string, args ...string) (*Node, error) {
	if c.spare == nil {
		return nil, errors.New("this run has no spare slot")
	}
	s := c.base
	n := &Node{ID: id, Index: c.spare.Index, NS: c.spare.NS, Host: c.spare.Host, API: c.spare.API, Raft: c.spare.Raft, Gossip: c.spare.Gossip, bin: s.Bin}
	n.DataDir = filepath.Join(s.DataDir, id)
	n.LogPath = filepath.Join(s.LogDir, id+".log")
	n.ClockPath = clockPath(s.DataDir, id)
	n.args = append([]string{"serve", "--id", n.ID, "--data-dir", n.DataDir, "--api-addr", n.API, "--raft-addr", n.Raft, "--gossip-addr", n.Gossip,
		"--" + ClockFlag, n.ClockPath}, s.Args...)
	n.args = append(n.args, args...)
	c.mu.Lock()
	c.extra = append(c.extra, n)
	c.mu.Unlock()
	return n, nil
}

// Extra returns the nodes Spare made.
func (c *Cluster) Extra() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.extra...)
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
