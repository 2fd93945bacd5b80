package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/internal/cli"
)

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
