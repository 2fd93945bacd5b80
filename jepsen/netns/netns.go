// Package netns builds a private network for a chaos test out of Linux
// network namespaces, and cuts and degrades its links with iptables.
//
// The layout keeps every address inside namespaces the harness creates (the
// root namespace gets no address and no interface): a "switch" namespace
// holds a bridge; every node namespace and one client namespace get a veth
// pair whose far end is a port of that bridge. Nodes and clients talk over
// a private /24 (10.77.X.0/24). Faults are iptables rules inside the node
// namespaces: a partition drops INPUT from the other side (both sides drop,
// as in Jepsen), packet loss drops a random share of a node's packets. The
// client namespace is never cut off, so clients keep reaching every node that
// runs, which is what exposes a deposed leader that still answers.
//
// Everything needs root and the ip (iproute2) and iptables commands.
package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Prefix starts the name of every namespace the harness creates.
const Prefix = "sqj-"

// Node is one node's namespace and address.
type Node struct {
	NS string // namespace name
	IP string // address on the private subnet
}

// Net is a private network of namespaces.
type Net struct {
	Prefix   string // Prefix + "<pid>", shared by all namespaces of this run
	Subnet   string // first three octets, e.g. "10.77.12"
	Switch   string // namespace holding the bridge
	Client   string // namespace the workload runs in
	ClientIP string
	Nodes    []Node
}

// cmdTimeout bounds every ip/iptables command.
const cmdTimeout = 20 * time.Second

func run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// Check reports why namespaces cannot be used here, or nil if they can:
// root, and the ip and iptables commands.
func Check() error {
	if os.Geteuid() != 0 {
		return errors.New("not running as root (network namespaces and iptables need root)")
	}
	var missing []string
	for _, c := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: install with `apt-get install -y iproute2 iptables`", strings.Join(missing, " and "))
	}
	return nil
}

// Setup creates the switch, client and n node namespaces for the run with
// the given id (usually the harness's pid) on subnet 10.77.<octet>.0/24.
// Node i (0-based) gets .11+i, the client .2. On error it removes what it made.
func Setup(id, n, octet int) (_ *Net, err error) {
	p := fmt.Sprintf("%s%d", Prefix, id)
	nt := &Net{
		Prefix:   p,
		Subnet:   fmt.Sprintf("10.77.%d", octet),
		Switch:   p + "-sw",
		Client:   p + "-c",
		ClientIP: fmt.Sprintf("10.77.%d.2", octet),
	}
	for i := range n {
		nt.Nodes = append(nt.Nodes, Node{NS: fmt.Sprintf("%s-n%d", p, i+1), IP: fmt.Sprintf("10.77.%d.%d", octet, 11+i)})
	}
	defer func() {
		if err != nil {
			nt.Teardown()
		}
	}()
	if _, err := run("ip", "netns", "add", nt.Switch); err != nil {
		return nil, err
	}
	for _, c := range [][]string{
		{"-n", nt.Switch, "link", "set", "lo", "up"},
		{"-n", nt.Switch, "link", "add", "br0", "type", "bridge"},
		{"-n", nt.Switch, "link", "set", "br0", "up"},
	} {
		if _, err := run("ip", c...); err != nil {
			return nil, err
		}
	}
	attach := func(ns, port, ip string) error {
		if _, err := run("ip", "netns", "add", ns); err != nil {
			return err
		}
		// The veth pair is created inside the switch namespace with its
		// peer moved straight into ns: the root namespace never sees it.
		for _, c := range [][]string{
			{"-n", ns, "link", "set", "lo", "up"},
			{"-n", nt.Switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
			{"-n", nt.Switch, "link", "set", port, "master", "br0"},
			{"-n", nt.Switch, "link", "set", port, "up"},
			{"-n", ns, "addr", "add", ip + "/24", "dev", "eth0"},
			{"-n", ns, "link", "set", "eth0", "up"},
		} {
			if _, err := run("ip", c...); err != nil {
				return err
			}
		}
		return nil
	}
	if err := attach(nt.Client, "vc", nt.ClientIP); err != nil {
		return nil, err
	}
	for i, nd := range nt.Nodes {
		if err := attach(nd.NS, fmt.Sprintf("vn%d", i+1), nd.IP); err != nil {
			return nil, err
		}
	}
	// iptables must work inside a node namespace, or no network fault can.
	if _, err := nt.iptables(0, "-L", "INPUT", "-n"); err != nil {
		return nil, fmt.Errorf("iptables does not work in a namespace: %w", err)
	}
	return nt, nil
}

// All returns every namespace of the run (nodes, client, switch).
func (nt *Net) All() []string {
	var out []string
	for _, n := range nt.Nodes {
		out = append(out, n.NS)
	}
	return append(out, nt.Client, nt.Switch)
}

// Teardown kills every process left in the run's namespaces (they are the
// harness's own: nodes it started) and deletes the namespaces. Deleting the
// namespaces also deletes the veths, the bridge and every iptables rule.
func (nt *Net) Teardown() []error {
	var errs []error
	for _, ns := range nt.All() {
		if err := remove(ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// remove kills the processes in ns (by pid, and waits for them to go) and
// deletes ns. A namespace that does not exist is not an error.
func remove(ns string) error {
	if !exists(ns) {
		return nil
	}
	for range 50 { // bounded: 50 × 100ms
		pids := Pids(ns)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, err := run("ip", "netns", "del", ns)
	return err
}

func exists(ns string) bool {
	_, err := os.Stat("/run/netns/" + ns)
	return err == nil
}

// Pids lists the processes running in namespace ns.
func Pids(ns string) []int {
	out, err := run("ip", "netns", "pids", ns)
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(out) {
		if p, err := strconv.Atoi(f); err == nil && p != os.Getpid() {
			pids = append(pids, p)
		}
	}
	return pids
}

// List returns the namespaces whose names start with prefix.
func List(prefix string) ([]string, error) {
	out, err := run("ip", "netns", "list")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.HasPrefix(f[0], prefix) {
			names = append(names, f[0])
		}
	}
	sort.Strings(names)
	return names, nil
}

// Cleanup removes leftover namespaces of earlier runs (names starting with
// Prefix) and kills the processes in them. Namespaces of a run whose harness
// process is still alive are skipped unless force is set. It returns what it
// removed and what it skipped.
func Cleanup(force bool) (removed, skipped []string, errs []error) {
	names, err := List(Prefix)
	if err != nil {
		return nil, nil, []error{err}
	}
	for _, ns := range names {
		if !force {
			if pid := ownerPid(ns); pid > 0 && pid != os.Getpid() && alive(pid) {
				skipped = append(skipped, ns)
				continue
			}
		}
		if err := remove(ns); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, ns)
	}
	return removed, skipped, errs
}

// ownerPid extracts <pid> from "sqj-<pid>-...".
func ownerPid(ns string) int {
	rest := strings.TrimPrefix(ns, Prefix)
	if i := strings.IndexByte(rest, '-'); i > 0 {
		if p, err := strconv.Atoi(rest[:i]); err == nil {
			return p
		}
	}
	return 0
}

func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// Exec returns the command line that runs args inside namespace ns.
func Exec(ns string, args ...string) []string {
	return append([]string{"ip", "netns", "exec", ns}, args...)
}

func (nt *Net) iptables(node int, args ...string) (string, error) {
	return run("ip", append([]string{"netns", "exec", nt.Nodes[node].NS, "iptables", "-w", "5"}, args...)...)
}

// Drop makes node drop every packet coming from the nodes in from.
func (nt *Net) Drop(node int, from []int) error {
	for _, f := range from {
		if f == node {
			continue
		}
		if _, err := nt.iptables(node, "-A", "INPUT", "-s", nt.Nodes[f].IP, "-j", "DROP"); err != nil {
			return err
		}
	}
	return nil
}

// Loss makes node drop a random share p (0 < p <= 1) of the packets it
// receives and sends on its link (to and from nodes and clients alike).
func (nt *Net) Loss(node int, p float64) error {
	prob := strconv.FormatFloat(p, 'f', 4, 64)
	for _, c := range [][]string{
		{"-A", "INPUT", "-i", "eth0", "-m", "statistic", "--mode", "random", "--probability", prob, "-j", "DROP"},
		{"-A", "OUTPUT", "-o", "eth0", "-m", "statistic", "--mode", "random", "--probability", prob, "-j", "DROP"},
	} {
		if _, err := nt.iptables(node, c...); err != nil {
			return err
		}
	}
	return nil
}

// Heal removes every rule the harness added on node.
func (nt *Net) Heal(node int) error {
	var errs []error
	for _, chain := range []string{"INPUT", "OUTPUT"} {
		if _, err := nt.iptables(node, "-F", chain); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// HealAll removes every rule on every node.
func (nt *Net) HealAll() error {
	var errs []error
	for i := range nt.Nodes {
		errs = append(errs, nt.Heal(i))
	}
	return errors.Join(errs...)
}

// Rules returns the rules currently on node (for logs and tests).
func (nt *Net) Rules(node int) string {
	out, _ := nt.iptables(node, "-S")
	return out
}
