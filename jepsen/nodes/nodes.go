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
