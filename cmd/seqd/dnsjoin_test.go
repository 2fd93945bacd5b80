package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/proctest"
)

// TestJoinByNamesThatResolveLater: three servers started, as a Kubernetes
// StatefulSet's pods are, with --join and --advertise-* naming hosts that no
// resolver knows yet (pods start in any order, and a pod's DNS record
// appears only once it is scheduled) form one cluster once the names
// resolve, and not before every name --join lists does.
//
// Each server runs in a mount namespace of its own whose /etc/hosts is a
// file of the test (unshare -m, mount --bind), the resolver the test
// controls; the names point at 127.0.0.11-13, loopback addresses the
// servers bind.
func TestJoinByNamesThatResolveLater(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a mount namespace (unshare -m) with its own /etc/hosts")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	if out, err := exec.Command(unshare, "-m", "true").CombinedOutput(); err != nil {
		t.Skipf("unshare -m does not work here: %v %s", err, out)
	}
	bin := proctest.Binary(t)
	hosts := filepath.Join(t.TempDir(), "hosts")
	writeHosts := func(names ...int) {
		t.Helper()
		text := "127.0.0.1 localhost\n"
		for _, i := range names {
			text += fmt.Sprintf("127.0.0.1%d n%d.seqd.test\n", i, i)
		}
		// In place, not by rename: the bind mounts hold this inode.
		if err := os.WriteFile(hosts, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeHosts()
	api, raftPort, gossip := proctest.FreePort(t), proctest.FreePort(t), proctest.FreePort(t)
	var joins []string
	for i := 1; i <= 3; i++ {
		joins = append(joins, fmt.Sprintf("n%d.seqd.test:%d", i, gossip))
	}
	var ps []*proctest.Proc
	for i := 1; i <= 3; i++ {
		ip, name := fmt.Sprintf("127.0.0.1%d", i), fmt.Sprintf("n%d.seqd.test", i)
		p := &proctest.Proc{ID: fmt.Sprintf("n%d", i), API: fmt.Sprintf("%s:%d", ip, api), Dir: filepath.Join(t.TempDir(), "d"), Bin: unshare}
		serve := []string{bin, "serve", "--id", p.ID, "--data-dir", p.Dir,
			"--api-addr", p.API, "--raft-addr", fmt.Sprintf("%s:%d", ip, raftPort), "--gossip-addr", fmt.Sprintf("%s:%d", ip, gossip),
			"--advertise-api", fmt.Sprintf("%s:%d", name, api), "--advertise-raft", fmt.Sprintf("%s:%d", name, raftPort),
			"--advertise-gossip", fmt.Sprintf("%s:%d", name, gossip),
			"--join", strings.Join(joins, ","), "--bootstrap-expect", "3"}
		p.Args = []string{"-m", "--", "sh", "-c", `mount --bind "$0" /etc/hosts && exec "$@"`, hosts}
		p.Args = append(p.Args, serve...)
		p.Start(t)
		ps = append(ps, p)
	}
	t.Cleanup(func() {
		for _, p := range ps {
			p.Kill9()
			if t.Failed() {
				t.Logf("log of %s:\n%s", p.ID, p.LogText())
			}
		}
	})
	// Two of three names: those two servers start, but none bootstraps
	// without every server its --join names.
	time.Sleep(2 * time.Second)
	writeHosts(1, 2)
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		if l := proctest.LeaderOf(ps); l != nil {
			t.Fatalf("%s leads before n3.seqd.test resolves", l.ID)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, p := range ps[:2] {
		if !strings.Contains(p.LogText(), "waiting to see every server --join names") {
			t.Errorf("%s does not say it waits for the --join list:\n%s", p.ID, p.LogText())
		}
	}
	writeHosts(1, 2, 3)
	proctest.WaitHealthy(t, ps, 90*time.Second)
	waitVoters(t, []string{ps[0].API}, "n1", "n2", "n3")
	out, stderr, code := runCLI(t, nil, "next", "--addr", ps[2].API, "--timeout", "20s", "42")
	if code != 0 || strings.TrimSpace(out) != "1" {
		t.Fatalf("next through n3: exit %d, %q %q", code, out, stderr)
	}
	// The raft configuration holds the names (dialled anew on every
	// connection), not the IPs they resolved to at start.
	out, _, _ = runCLI(t, nil, "status", "--addr", ps[0].API)
	if !strings.Contains(out, fmt.Sprintf("n3.seqd.test:%d", raftPort)) {
		t.Errorf("status does not show the raft address by name:\n%s", out)
	}
}
