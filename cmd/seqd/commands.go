package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seqd/seqd"
	healthv1 "github.com/seqd/seqd/api/gen/grpc/health/v1"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/cli"
)

// clientFlags are the flags every client command takes.
type clientFlags struct {
	addr     *string
	timeout  *time.Duration
	protocol *string
	tlsCA    *string
	token    *string
}

func addClientFlags(fs *flag.FlagSet) clientFlags {
	return clientFlags{
		addr:     fs.String("addr", "127.0.0.1:7700", "comma-separated API addresses of cluster nodes"),
		timeout:  fs.Duration("timeout", 10*time.Second, "how long the call may take, retries included"),
		protocol: fs.String("protocol", "connect", "wire protocol: connect, grpc or grpcweb"),
		tlsCA:    fs.String("tls-ca", "", "CA bundle (PEM) of a cluster that serves TLS (implies https)"),
		token:    fs.String("token", "", "bearer token of a cluster that requires one (prefer SEQD_TOKEN)"),
	}
}

// options returns the client options for the flags: h2c by default, HTTPS
// (HTTP/2) with --tls-ca, and a bearer token on every call with --token.
func (f clientFlags) options() (client.Options, error) {
	// One command makes one or two calls: following the nodes' leader hints
	// is enough, a routing table refresh would only add a ClusterStatus.
	opts := client.Options{Protocol: client.Protocol(*f.protocol), RetryFor: *f.timeout, HTTP2: true,
		DisableRouting: true, Token: *f.token}
	if *f.tlsCA != "" {
		pool, err := cli.LoadCA(*f.tlsCA)
		if err != nil {
			return opts, err
		}
		opts.TLS = &tls.Config{RootCAs: pool}
	}
	return opts, nil
}

// newClient returns the client for the flags' addresses and options.
func (f clientFlags) newClient(opts client.Options) (*client.Client, error) {
	c, err := client.New(strings.Split(*f.addr, ","), opts)
	if err != nil {
		return nil, cli.Usagef("%v", err)
	}
	return c, nil
}

func (f clientFlags) dial() (*client.Client, context.Context, context.CancelFunc, error) {
	opts, err := f.options()
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := f.newClient(opts)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *f.timeout)
	return c, ctx, cancel, nil
}

func parseKeys(ops []string) ([]uint64, error) {
	if len(ops) == 0 {
		return nil, cli.Usagef("at least one KEY is required")
	}
	keys := make([]uint64, len(ops))
	for i, s := range ops {
		k, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, cli.Usagef("KEY %q is not an unsigned 64-bit integer", s)
		}
		keys[i] = k
	}
	return keys, nil
}

func keysCommand(args []string, name, desc string, do func(*client.Client, context.Context, string, []uint64) ([]uint64, error)) error {
	fs := cli.NewFlagSet(name, "seqd "+name+" [--space S] KEY...", desc)
	space := fs.String("space", seqd.DefaultSpaceName, "space name")
	cf := addClientFlags(fs)
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	keys, err := parseKeys(ops)
	if err != nil {
		return err
	}
	if len(keys) > seqd.MaxKeys {
		return cli.Usagef("%s takes at most %d keys per call, got %d", name, seqd.MaxKeys, len(keys))
	}
	c, ctx, cancel, err := cf.dial()
	if err != nil {
		return err
	}
	defer cancel()
	vals, err := do(c, ctx, *space, keys)
	if err != nil {
		return cli.CallError(err)
	}
	for _, v := range vals {
		fmt.Println(v)
	}
	return nil
}

func cmdNext(args []string) error {
	return keysCommand(args, "next", "Prints one new value per KEY, one per line, in order.",
		func(c *client.Client, ctx context.Context, space string, keys []uint64) ([]uint64, error) {
			return c.Next(ctx, space, keys...)
		})
}

func cmdCurrent(args []string) error {
	return keysCommand(args, "current", "Prints the current value of each KEY, one per line (0: none issued).",
		func(c *client.Client, ctx context.Context, space string, keys []uint64) ([]uint64, error) {
			return c.Current(ctx, space, keys...)
		})
}

func cmdReserve(args []string) error {
	fs := cli.NewFlagSet("reserve", "seqd reserve [--space S] KEY COUNT",
		"Reserves COUNT consecutive values for KEY and prints the first and the last, space-separated.")
	space := fs.String("space", seqd.DefaultSpaceName, "space name")
	cf := addClientFlags(fs)
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 2 {
		return cli.Usagef("reserve takes KEY COUNT")
	}
	keys, err := parseKeys(ops[:1])
	if err != nil {
		return err
	}
	count, err := strconv.ParseUint(ops[1], 10, 64)
	if err != nil || count == 0 || count > seqd.MaxReserveCount {
		return cli.Usagef("COUNT %q must be a whole number from 1 to %d", ops[1], seqd.MaxReserveCount)
	}
	c, ctx, cancel, err := cf.dial()
	if err != nil {
		return err
	}
	defer cancel()
	first, err := c.Reserve(ctx, *space, keys[0], uint32(count))
	if err != nil {
		return cli.CallError(err)
	}
	fmt.Println(first, first+count-1)
	return nil
}

func cmdSpace(args []string) error {
	if err := cli.Subcommand(args, "seqd space create|update|delete|list", "Creates, changes, deletes and lists spaces (families of per-key sequences).",
		"create NAME [--step N] [--section-size N]", "update NAME --step N", "delete NAME", "list"); err != nil {
		return err
	}
	switch args[0] {
	case "update":
		return cmdSpaceUpdate(args[1:])
	case "delete":
		return cmdSpaceDelete(args[1:])
	case "create":
		fs := cli.NewFlagSet("space create", "seqd space create NAME [--step N] [--section-size N]",
			"Creates a space. Creating an existing space with the same settings succeeds.")
		step := fs.Uint64("step", 10000, "values the leader reserves per raise of a section's high-water mark")
		size := fs.Uint64("section-size", 100000, "keys per section (sharing one high-water mark)")
		cf := addClientFlags(fs)
		ops, err := cli.ParseFlags(fs, args[1:])
		if err != nil {
			return err
		}
		if len(ops) != 1 {
			return cli.Usagef("space create takes one NAME")
		}
		if *step == 0 || *size == 0 {
			return cli.Usagef("--step and --section-size must be at least 1")
		}
		c, ctx, cancel, err := cf.dial()
		if err != nil {
			return err
		}
		defer cancel()
		resp, err := c.CreateSpace(ctx, ops[0], *step, *size)
		if err != nil {
			return cli.CallError(err)
		}
		verb := "created"
		if !resp.GetCreated() {
			verb = "exists"
		}
		fmt.Printf("%s space %s step=%d section_size=%d\n", verb, resp.GetSpace().GetName(), resp.GetSpace().GetStep(), resp.GetSpace().GetSectionSize())
		return nil
	case "list":
		fs := cli.NewFlagSet("space list", "seqd space list", "Lists every space with its settings.")
		cf := addClientFlags(fs)
		ops, err := cli.ParseFlags(fs, args[1:])
		if err != nil {
			return err
		}
		if len(ops) != 0 {
			return cli.Usagef("space list takes no arguments")
		}
		c, ctx, cancel, err := cf.dial()
		if err != nil {
			return err
		}
		defer cancel()
		spaces, err := c.ListSpaces(ctx)
		if err != nil {
			return cli.CallError(err)
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSTEP\tSECTION_SIZE")
		for _, s := range spaces {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", s.GetName(), s.GetStep(), s.GetSectionSize())
		}
		return tw.Flush()
	}
	return nil // cli.Subcommand refused any other
}

func cmdStatus(args []string) error {
	fs := cli.NewFlagSet("status", "seqd status", "Shows every node with its raft state, the leader and the term.")
	cf := addClientFlags(fs)
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 0 {
		return cli.Usagef("status takes no arguments")
	}
	c, ctx, cancel, err := cf.dial()
	if err != nil {
		return err
	}
	defer cancel()
	st, err := c.ClusterStatus(ctx)
	if err != nil {
		return cli.CallError(err)
	}
	leader := st.GetLeaderId()
	if leader == "" {
		leader = "(none)"
	}
	cluster, proto := st.GetClusterId(), uint64(1)
	if cluster == "" {
		cluster = "(none yet)"
	}
	for _, n := range st.GetNodes() {
		if n.GetId() == st.GetNodeId() {
			proto = max(proto, n.GetProtocol())
		}
	}
	generation := "-"
	for _, n := range st.GetNodes() {
		if n.GetId() == st.GetNodeId() && n.GetGeneration() != "" {
			if g, err := seqd.ParseGeneration(n.GetGeneration()); err == nil {
				generation = fmt.Sprintf("%d (lineage %s)", g.Number, g.Lineage)
			}
		}
	}
	fmt.Printf("leader: %s  term: %d  routing version: %d  answered by: %s\ncluster: %s  protocol: %d  generation: %s\n\n",
		leader, st.GetTerm(), st.GetVersion(), st.GetNodeId(), cluster, proto, generation)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tSERVING\tMEMBER\tTERM\tAPPLIED\tLAST_CONTACT\tAPI\tRAFT\tNOTES")
	for _, n := range st.GetNodes() {
		member := "no"
		switch {
		case n.GetVoter():
			member = "voter"
		case n.GetInConfiguration():
			member = "non-voter"
		}
		var notes []string
		if n.GetRaftState() != "unreachable" {
			if !n.GetRaftOpen() || n.GetFenced() {
				notes = append(notes, refusingNote(n))
			}
			if n.GetDiskFull() {
				notes = append(notes, "disk-full")
			}
			if c := n.GetClusterId(); c != "" && st.GetClusterId() != "" && c != st.GetClusterId() {
				notes = append(notes, "other-cluster:"+c)
			}
		}
		note := strings.Join(notes, ",")
		if note == "" {
			note = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", n.GetId(), n.GetRaftState(), n.GetServing(), member,
			n.GetTerm(), n.GetAppliedIndex(), n.GetLastContact().AsDuration().Round(time.Millisecond), n.GetApiAddr(), n.GetRaftAddr(), note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.GetGroups()) > 1 {
		fmt.Println("(STATE, SERVING and TERM above are group 0's; every group's are below)")
		return printGroups(st)
	}
	return nil
}

// refusingNote says that node n refuses raft traffic, why (the admission
// verdict's kind, when the server reports it), and, when it refuses only
// some of its groups' traffic, which: "refusing-raft:stale",
// "refusing-raft(group 3:stale)", "fenced".
func refusingNote(n *seqv1.Node) string {
	if n.GetFenced() {
		return "fenced"
	}
	var shut []string
	kinds := map[string]bool{}
	for _, g := range n.GetGroups() {
		if !g.GetRaftOpen() {
			shut = append(shut, fmt.Sprintf("group %d%s", g.GetGroup(), kindSuffix(g.GetAdmission())))
			kinds[g.GetAdmission()] = true
		}
	}
	if len(shut) == 0 || (len(shut) == len(n.GetGroups()) && len(kinds) == 1) {
		kind := ""
		for k := range kinds {
			kind = k
		}
		return "refusing-raft" + kindSuffix(kind)
	}
	return "refusing-raft(" + strings.Join(shut, ", ") + ")"
}

// kindSuffix is ":kind", or nothing for a server that does not report it.
func kindSuffix(kind string) string {
	if kind == "" {
		return ""
	}
	return ":" + kind
}

// printGroups prints the routing table of a cluster of several groups, each
// group's protocol as the answering node has it ("-" from a server older
// than the field), and how many groups each node leads.
func printGroups(st *seqv1.ClusterStatusResponse) error {
	leads := map[string]int{}
	protocols := map[uint32]uint64{}
	for _, n := range st.GetNodes() {
		if n.GetId() == st.GetNodeId() {
			for _, g := range n.GetGroups() {
				protocols[g.GetGroup()] = g.GetProtocol()
			}
		}
	}
	fmt.Printf("\ngroups: %d  slots: %d  slot map version: %d\n", len(st.GetGroups()), st.GetSlotCount(), st.GetSlotMapVersion())
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tLEADER\tSERVING\tTERM\tPROTOCOL\tPREFERRED\tSLOTS\tVOTERS")
	for _, g := range st.GetGroups() {
		leader := g.GetLeaderId()
		if leader == "" {
			leader = "(none)"
		} else {
			leads[leader]++
		}
		proto := "-"
		if p := protocols[g.GetGroup()]; p > 0 {
			proto = strconv.FormatUint(p, 10)
		}
		fmt.Fprintf(tw, "%d\t%s\t%v\t%d\t%s\t%s\t%d-%d\t%s\n", g.GetGroup(), leader, g.GetServing(), g.GetTerm(), proto,
			g.GetPreferredLeader(), g.GetFirstSlot(), g.GetEndSlot()-1, strings.Join(g.GetVoters(), ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var parts []string
	for _, n := range st.GetNodes() {
		parts = append(parts, fmt.Sprintf("%s %d", n.GetId(), leads[n.GetId()]))
	}
	fmt.Printf("\ngroups led: %s\n", strings.Join(parts, ", "))
	return nil
}

func cmdNode(args []string) error {
	if err := cli.Subcommand(args, "seqd node remove|drain", "Changes a server's place in the cluster.",
		"remove ID          remove a server from every raft group's configuration",
		"drain [--undo] ID  move every raft group ID leads to other servers"); err != nil {
		return err
	}
	if args[0] == "drain" {
		return cmdNodeDrain(args[1:])
	}
	fs := cli.NewFlagSet("node remove", "seqd node remove ID",
		"Removes server ID from the raft configuration. It stops voting, and the leader never adds it\n"+
			"back while it keeps its data: to bring the machine back, stop it, delete its data directory\n"+
			"and start it again (it joins as a non-voter and is promoted once caught up).")
	cf := addClientFlags(fs)
	ops, err := cli.ParseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if len(ops) != 1 || ops[0] == "" {
		return cli.Usagef("node remove takes one ID")
	}
	c, ctx, cancel, err := cf.dial()
	if err != nil {
		return err
	}
	defer cancel()
	if err := c.RemoveNode(ctx, ops[0]); err != nil {
		return cli.CallError(err)
	}
	fmt.Printf("removed %s\n", ops[0])
	return nil
}

// loopback is addr with an unspecified host (0.0.0.0, ::, none) replaced by
// 127.0.0.1: where a server listening on every address is reached locally.
func loopback(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

func cmdHealth(args []string) error {
	fs := cli.NewFlagSet("health", "seqd health [--addr A] [--service S]",
		"Asks one node for its standard gRPC health status. Exits 0 when SERVING, 1 otherwise\n"+
			"(for container health checks and scripts). Without --addr (or SEQD_ADDR) it asks the node\n"+
			"this environment's SEQD_API_ADDR serves, on loopback when that listens on every address:\n"+
			"a container's health check follows the API address the container was given.")
	service := fs.String("service", "seq.v1.SequenceService", "service to ask about (\"\" for the server)")
	cf := addClientFlags(fs)
	*cf.timeout = 3 * time.Second
	if a := os.Getenv("SEQD_API_ADDR"); a != "" {
		*cf.addr = loopback(a)
	}
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 0 {
		return cli.Usagef("health takes no arguments")
	}
	opts, err := cf.options()
	if err != nil {
		return err
	}
	opts.Protocol = client.GRPC // the standard gRPC health check, as container runtimes make it
	c, err := cf.newClient(opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *cf.timeout)
	defer cancel()
	st, err := c.Health(ctx, *service)
	if err != nil {
		return cli.CallError(err)
	}
	fmt.Println(st)
	if st != healthv1.HealthCheckResponse_SERVING {
		return fmt.Errorf("%s is %s", strings.TrimSpace(strings.Split(*cf.addr, ",")[0]), st)
	}
	return nil
}

func cmdNodeDrain(args []string) error {
	fs := cli.NewFlagSet("node drain", "seqd node drain [--undo] ID | --self",
		"Makes server ID hand every raft group it leads to other voters and stop being preferred for\n"+
			"any, and waits until it leads none (at most --timeout). Drain before maintenance;\n"+
			"it lasts until --undo or until the server restarts. Exits 1 if groups are still led there.\n"+
			"--self drains the server --addr names (a container's preStop hook: --addr 127.0.0.1:7700).")
	undo := fs.Bool("undo", false, "end the drain: the server may lead groups again")
	self := fs.Bool("self", false, "drain the server at --addr (its ID asked from it) instead of naming an ID")
	cf := addClientFlags(fs)
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if *self != (len(ops) == 0) || len(ops) > 1 || len(ops) == 1 && ops[0] == "" {
		return cli.Usagef("node drain takes one ID, or --self")
	}
	c, ctx, cancel, err := cf.dial()
	if err != nil {
		return err
	}
	defer cancel()
	if *self {
		if strings.Contains(*cf.addr, ",") {
			return cli.Usagef("node drain --self needs one --addr: the server to drain")
		}
		st, err := c.ClusterStatus(ctx)
		if err != nil {
			return cli.CallError(err)
		}
		ops = []string{st.GetNodeId()}
	}
	led, err := c.DrainNode(ctx, ops[0], *undo)
	if err != nil {
		return cli.CallError(err)
	}
	if *undo {
		fmt.Printf("%s undrained (leads %d groups)\n", ops[0], led)
	} else {
		fmt.Printf("%s drained: leads no group\n", ops[0])
	}
	return nil
}
