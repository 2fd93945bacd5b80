package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// previousBuilds holds the builds of earlier commits made in this test
// process, one per commit: several tests start from the same commit, and
// each build takes about 20 s of both cores.
var previousBuilds = struct {
	sync.Mutex
	dir    string
	commit map[string]*previousBuild
}{commit: map[string]*previousBuild{}}

type previousBuild struct {
	once sync.Once
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if previousBuilds.dir != "" {
		_ = os.RemoveAll(previousBuilds.dir)
	}
	os.Exit(code)
}

// buildPrevious builds seqd at previousRelease from this repository's git
// history (git archive into a temporary directory, go build there), once
// per test process; it skips the test if the checkout lacks the commit.
func buildPrevious(t *testing.T, previousRelease string) string {
	t.Helper()
	if err := exec.Command("git", "cat-file", "-e", previousRelease+"^{commit}").Run(); err != nil {
		t.Skipf("commit %s is not in this checkout's history (a shallow clone?): %v", previousRelease, err)
	}
	previousBuilds.Lock()
	if previousBuilds.dir == "" {
		dir, err := os.MkdirTemp("", "seqd-previous-builds")
		if err != nil {
			previousBuilds.Unlock()
			t.Fatal(err)
		}
		previousBuilds.dir = dir
	}
	b := previousBuilds.commit[previousRelease]
	if b == nil {
		b = &previousBuild{}
		previousBuilds.commit[previousRelease] = b
	}
	dir := previousBuilds.dir
	previousBuilds.Unlock()
	b.once.Do(func() { b.bin, b.err = build(dir, previousRelease) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// build builds seqd at commit into dir/seqd-<commit>.
func build(dir, commit string) (string, error) {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("git rev-parse: %v", err)
	}
	src, err := os.MkdirTemp(dir, "src-"+commit)
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	// From the top: git archive run in a subdirectory archives only it.
	archive := exec.Command("sh", "-c", fmt.Sprintf("git archive %s | tar -x -C %s", commit, src))
	archive.Dir = strings.TrimSpace(string(top))
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %v %s", commit, err, out)
	}
	bin := filepath.Join(dir, "seqd-"+commit)
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/seqd")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %v %s", commit, err, out)
	}
	return bin, nil
}
