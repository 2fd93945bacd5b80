// Package deploy holds what runs seqd elsewhere: the container image's
// second build file (container/) and the Kubernetes manifests (kubernetes/,
// checked by their own module). Its test keeps the two image builds in step.
package deploy

import (
	"os"
	"strings"
	"testing"
)

// runtimeLayout returns the instructions of a Dockerfile's last stage, one
// per line (continuations joined, comments dropped), with each COPY's
// source left out: the files the image holds and how it runs, not where a
// build found them.
func runtimeLayout(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out, cur []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cont := strings.HasSuffix(line, "\\")
		cur = append(cur, strings.TrimSpace(strings.TrimSuffix(line, "\\")))
		if cont {
			continue
		}
		ins := strings.Join(cur, " ")
		cur = nil
		f := strings.Fields(ins)
		switch strings.ToUpper(f[0]) {
		case "FROM":
			out = nil // a new stage: only the last one runs
			continue
		case "COPY":
			var flags []string
			for _, w := range f[1 : len(f)-1] {
				if strings.HasPrefix(w, "--") && !strings.HasPrefix(w, "--from=") {
					flags = append(flags, w)
				}
			}
			ins = strings.Join(append(append([]string{"COPY"}, flags...), f[len(f)-1]), " ")
		}
		out = append(out, ins)
	}
	return out
}

// TestImagesShareTheRuntimeLayout: the Dockerfile users build (a distroless
// base) and deploy/container/Containerfile, the image CI builds and runs
// (an empty base), end in the same runtime instructions: the binary's path,
// /data owned by the user, the user, the volume, the environment, the ports,
// the health check, the entrypoint and the command.
func TestImagesShareTheRuntimeLayout(t *testing.T) {
	docker := runtimeLayout(t, "../Dockerfile")
	ci := runtimeLayout(t, "container/Containerfile")
	if strings.Join(docker, "\n") != strings.Join(ci, "\n") {
		t.Fatalf("the runtime layouts differ:\nDockerfile:\n  %s\ndeploy/container/Containerfile:\n  %s",
			strings.Join(docker, "\n  "), strings.Join(ci, "\n  "))
	}
	for _, want := range []string{"COPY /usr/local/bin/seqd", "COPY --chown=65532:65532 /data", "USER 65532:65532", "VOLUME /data",
		`ENTRYPOINT ["/usr/local/bin/seqd"]`, `CMD ["serve"]`} {
		found := false
		for _, ins := range ci {
			found = found || ins == want
		}
		if !found {
			t.Errorf("the layout lacks %q:\n  %s", want, strings.Join(ci, "\n  "))
		}
	}
}
