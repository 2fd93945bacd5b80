package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seqd/seqd/jepsen/netns"
	"github.com/seqd/seqd/jepsen/nodes"
)

// plan is what the harness decided before running the test.
type plan struct {
	Net  *netns.Net `json:"net,omitempty"` // nil: loopback
	Bin  string     `json:"bin"`
	Seed uint64     `json:"seed"`
	// NetNote says why the test runs on loopback, if it does.
	NetNote string `json:"net_note,omitempty"`
}

// launch prepares the test (network, binary) and runs it: on loopback in
// this process, or re-executed inside the client namespace; then it removes
// what it made.
func launch(cfg *config, args []string) int {
	p := plan{Seed: cfg.Seed}
	if p.Seed == 0 {
		p.Seed = rand.Uint64() % 1_000_000_000
	}
	useNetns := false
	switch cfg.Net {
	case "netns", "auto":
		if err := netns.Check(); err != nil {
			if cfg.Net == "netns" {
				fmt.Fprintf(os.Stderr, "jepsen: --net netns: %v\n", err)
				return exitHarness
			}
			p.NetNote = "network namespaces unavailable: " + err.Error() + "; running on loopback with process and membership faults only (kill, pause, member-*)"
			fmt.Fprintf(os.Stderr, "jepsen: NOTE: %s\n", p.NetNote)
		} else {
			useNetns = true
		}
	case "loopback":
		p.NetNote = "--net loopback: process and membership faults only (kill, pause, member-*)"
	}

	// Build seqd.
	binDir := ""
	if cfg.SeqdBin != "" {
		abs, err := filepath.Abs(cfg.SeqdBin)
		if err != nil {
			fmt.Fprintf(os.Stderr, "jepsen: %v\n", err)
			return exitHarness
		}
		p.Bin = abs
	} else {
		var err error
		binDir, err = os.MkdirTemp("", fmt.Sprintf("%s%d-", binDirPrefix, os.Getpid()))
		if err != nil {
			fmt.Fprintf(os.Stderr, "jepsen: %v\n", err)
			return exitHarness
		}
		defer os.RemoveAll(binDir)
		p.Bin = filepath.Join(binDir, "seqd")
		if err := buildSeqd(p.Bin); err != nil {
			fmt.Fprintf(os.Stderr, "jepsen: %v\n", err)
			return exitHarness
		}
	}
	if !useNetns {
		return run(cfg, p)
	}

	// Namespaces, then the test re-executed in the client namespace.
	octet := 20 + os.Getpid()%200
	slots := cfg.Nodes
	if cfg.spare {
		slots++ // a server that is not one of the nodes (restore-source-returns)
	}
	nt, err := netns.Setup(os.Getpid(), slots, octet)
	if err != nil {
		fmt.Fprintf(os.Stderr, "jepsen: setting up network namespaces: %v\n", err)
		return exitHarness
	}
	p.Net = nt
	defer func() {
		if errs := nt.Teardown(); len(errs) > 0 {
			fmt.Fprintf(os.Stderr, "jepsen: cleanup: %v (run `go run . --cleanup` in jepsen/)\n", errors.Join(errs...))
		}
	}()
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "jepsen: %v\n", err)
		return exitHarness
	}
	pj, _ := json.Marshal(p)
	argv := netns.Exec(nt.Client, append([]string{exe}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), runnerEnv+"="+string(pj))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Catch signals before starting the runner, so none is missed.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "jepsen: starting the runner in %s: %v\n", nt.Client, err)
		return exitHarness
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	signals := 0
	for {
		select {
		case err := <-done:
			if err == nil {
				return exitValid
			}
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() >= 0 {
				return ee.ExitCode()
			}
			fmt.Fprintf(os.Stderr, "jepsen: runner: %v\n", err)
			return exitHarness
		case s := <-sigs:
			// The runner stops the test itself on SIGINT/SIGTERM (a ^C
			// reaches it directly too); a second signal kills it.
			signals++
			if signals == 1 {
				fmt.Fprintf(os.Stderr, "jepsen: %v: stopping the test (again to kill it)\n", s)
				_ = cmd.Process.Signal(syscall.SIGTERM)
			} else {
				_ = cmd.Process.Kill()
			}
		}
	}
}

// repoRoot finds the seqd module's directory from the working directory up.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for range 64 {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			isSeqd := sc.Scan() && strings.TrimSpace(sc.Text()) == "module github.com/seqd/seqd"
			f.Close()
			if isSeqd {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", errors.New("not inside the seqd repository: run from it, or pass --seqd-bin")
}

func buildSeqd(out string) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	goBin := "go"
	if _, err := exec.LookPath("go"); err != nil {
		goBin = filepath.Join(getenvDefault("GOROOT", "/usr/local/go"), "bin", "go")
	}
	start := time.Now()
	cmd := exec.Command(goBin, "build", "-o", out, "./cmd/seqd")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/seqd: %v\n%s", err, b)
	}
	fmt.Fprintf(os.Stderr, "jepsen: built seqd from %s in %v\n", root, time.Since(start).Round(100*time.Millisecond))
	return nil
}

func getenvDefault(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// binDirPrefix starts the name of the temporary directory seqd is built
// into (followed by the harness's pid).
const binDirPrefix = "sqj-bin-"

// cleanupBinDirs removes build directories of harnesses that are gone.
func cleanupBinDirs() []string {
	var removed []string
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), binDirPrefix+"*"))
	for _, d := range dirs {
		rest := strings.TrimPrefix(filepath.Base(d), binDirPrefix)
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err == nil && pid > 0 && syscall.Kill(pid, 0) == nil {
			continue // its harness is still running
		}
		if os.RemoveAll(d) == nil {
			removed = append(removed, d)
		}
	}
	return removed
}

// cleanup removes leftovers of earlier runs.
func cleanup(force bool) int {
	for _, d := range cleanupBinDirs() {
		fmt.Printf("removed %s\n", d)
	}
	done, derrs := nodes.CleanupDisks(force)
	for _, d := range done {
		fmt.Printf("small disks: %s\n", d)
	}
	if len(derrs) > 0 {
		fmt.Fprintf(os.Stderr, "jepsen: --cleanup: small disks: %v\n", errors.Join(derrs...))
	}
	if err := netns.Check(); err != nil {
		fmt.Fprintf(os.Stderr, "jepsen: --cleanup: namespaces: %v\n", err)
		return exitHarness
	}
	removed, skipped, errs := netns.Cleanup(force)
	for _, ns := range removed {
		fmt.Printf("removed %s\n", ns)
	}
	for _, ns := range skipped {
		fmt.Printf("skipped %s (its harness is still running; --force to remove)\n", ns)
	}
	if len(removed)+len(skipped) == 0 && len(errs) == 0 {
		fmt.Println("no namespaces to clean up")
	}
	if len(errs) > 0 {
		fmt.Fprintf(os.Stderr, "jepsen: --cleanup: %v\n", errors.Join(errs...))
		return exitHarness
	}
	if len(derrs) > 0 {
		return exitHarness
	}
	return exitValid
}
