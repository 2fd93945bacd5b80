// Package kubernetes checks seqd's Kubernetes manifests: each document
// decodes strictly (no unknown or duplicate field) into its Kubernetes API
// type, and the manifests agree with each other, with the image
// (../../Dockerfile) and with seqd serve's flags. It is a module of its own
// so that k8s.io/api stays out of the server's go.mod.
package kubernetes

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// objects decodes every document of the manifests the kustomization lists.
type objects struct {
	sts      []appsv1.StatefulSet
	services []corev1.Service
	pdbs     []policyv1.PodDisruptionBudget
}

func load(t *testing.T) objects {
	t.Helper()
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	b, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	entries, _ := os.ReadDir(".")
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".yaml") && e.Name() != "kustomization.yaml" && !slices.Contains(k.Resources, e.Name()) {
			t.Errorf("kustomization.yaml does not list %s", e.Name())
		}
	}
	var out objects
	for _, f := range k.Resources {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			where := fmt.Sprintf("%s document %d (%s %s)", f, i, meta.APIVersion, meta.Kind)
			var target any
			switch meta.APIVersion + " " + meta.Kind {
			case "apps/v1 StatefulSet":
				out.sts = append(out.sts, appsv1.StatefulSet{})
				target = &out.sts[len(out.sts)-1]
			case "v1 Service":
				out.services = append(out.services, corev1.Service{})
				target = &out.services[len(out.services)-1]
			case "policy/v1 PodDisruptionBudget":
				out.pdbs = append(out.pdbs, policyv1.PodDisruptionBudget{})
				target = &out.pdbs[len(out.pdbs)-1]
			default:
				t.Fatalf("%s: a kind this test does not know", where)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), target); err != nil {
				t.Fatalf("%s does not decode strictly: %v", where, err)
			}
		}
	}
	return out
}

func stripComments(doc string) string {
	var b bytes.Buffer
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestStrictDecodingCatchesMistakes: the decoding the manifests pass
// refuses a misspelt field and a field of the wrong type.
func TestStrictDecodingCatchesMistakes(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: apps/v1\nkind: StatefulSet\nspec:\n  replica: 3\n",
		"apiVersion: apps/v1\nkind: StatefulSet\nspec:\n  replicas: three\n",
		"apiVersion: v1\nkind: Service\nspec:\n  clusterIP: None\n  clusterIP: None\n",
	} {
		var s appsv1.StatefulSet
		if err := yaml.UnmarshalStrict([]byte(doc), &s); err == nil {
			t.Errorf("decoded without error: %q", doc)
		}
	}
}

// TestManifests: what docs/deployment.md promises of them.
func TestManifests(t *testing.T) {
	o := load(t)
	if len(o.sts) != 1 || len(o.services) != 2 || len(o.pdbs) != 1 {
		t.Fatalf("%d StatefulSets, %d Services, %d PodDisruptionBudgets; want 1, 2, 1", len(o.sts), len(o.services), len(o.pdbs))
	}
	sts := o.sts[0]
	spec := sts.Spec
	pod := spec.Template.Spec
	labels := spec.Template.Labels
	if spec.Replicas == nil || *spec.Replicas != 3 {
		t.Errorf("replicas %v, want 3", spec.Replicas)
	}
	if spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy %q: the pods must be able to start in any order (Parallel)", spec.PodManagementPolicy)
	}
	if !selects(spec.Selector.MatchLabels, labels) {
		t.Errorf("the selector %v does not select the pods %v", spec.Selector.MatchLabels, labels)
	}

	// The headless Service names the pods, before they are ready; the
	// client Service reaches the API.
	var headless, api *corev1.Service
	for i := range o.services {
		s := &o.services[i]
		if s.Spec.ClusterIP == corev1.ClusterIPNone {
			headless = s
		} else {
			api = s
		}
		if !selects(s.Spec.Selector, labels) {
			t.Errorf("Service %s selects %v, not the pods %v", s.Name, s.Spec.Selector, labels)
		}
	}
	if headless == nil || api == nil {
		t.Fatal("want a headless Service and a client Service")
	}
	if spec.ServiceName != headless.Name || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("serviceName %q, headless %q, publishNotReadyAddresses %v: the pods' names must resolve before they are ready",
			spec.ServiceName, headless.Name, headless.Spec.PublishNotReadyAddresses)
	}

	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	flags := map[string]string{}
	for _, a := range c.Args[1:] {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok || !strings.HasPrefix(a, "--") {
			t.Errorf("arg %q: write flags as --name=value", a)
		}
		flags[name] = value
	}
	if c.Args[0] != "serve" {
		t.Errorf("args %v: want serve first", c.Args)
	}
	known := serveFlags(t)
	for name := range flags {
		if !known[name] {
			t.Errorf("--%s is not a flag of seqd serve", name)
		}
	}
	// --join names every pod by the headless Service; each pod advertises
	// its own name there.
	var joins []string
	for i := 0; i < int(*spec.Replicas); i++ {
		joins = append(joins, fmt.Sprintf("%s-%d.%s.$(POD_NAMESPACE).svc.cluster.local:7702", sts.Name, i, headless.Name))
	}
	if flags["join"] != strings.Join(joins, ",") {
		t.Errorf("--join=%s, want %s", flags["join"], strings.Join(joins, ","))
	}
	if flags["bootstrap-expect"] != fmt.Sprint(*spec.Replicas) {
		t.Errorf("--bootstrap-expect=%s, want the replicas", flags["bootstrap-expect"])
	}
	for flag, port := range map[string]string{"advertise-api": "7700", "advertise-raft": "7701", "advertise-gossip": "7702"} {
		if want := "$(POD_NAME)." + headless.Name + ".$(POD_NAMESPACE).svc.cluster.local:" + port; flags[flag] != want {
			t.Errorf("--%s=%s, want %s", flag, flags[flag], want)
		}
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["POD_NAME"] != "metadata.name" || env["POD_NAMESPACE"] != "metadata.namespace" {
		t.Errorf("env %v: POD_NAME and POD_NAMESPACE from the downward API", env)
	}

	// Probes on the gRPC health check; a preStop that drains; requests.
	if p := c.ReadinessProbe; p == nil || p.GRPC == nil || p.GRPC.Port != 7700 || p.GRPC.Service == nil || *p.GRPC.Service != "seq.v1.SequenceService" {
		t.Errorf("readinessProbe %+v: want the gRPC health check of seq.v1.SequenceService on 7700", p)
	}
	if c.LivenessProbe == nil {
		t.Error("no livenessProbe")
	}
	if h := c.Lifecycle; h == nil || h.PreStop == nil || h.PreStop.Exec == nil ||
		!slices.Equal(h.PreStop.Exec.Command[:4], []string{"/usr/local/bin/seqd", "node", "drain", "--self"}) {
		t.Errorf("preStop %+v: want seqd node drain --self", h)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("resources.requests %v: want cpu and memory", c.Resources.Requests)
	}
	if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds < 35 {
		t.Errorf("terminationGracePeriodSeconds %v: the drain (20 s) and the shutdown (10 s) must fit", pod.TerminationGracePeriodSeconds)
	}

	// The image: its user, data volume and ports.
	image := imageLayout(t)
	sc := pod.SecurityContext
	if sc == nil || sc.RunAsUser == nil || fmt.Sprint(*sc.RunAsUser) != image.uid || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.FSGroup == nil {
		t.Errorf("securityContext %+v: want runAsNonRoot, runAsUser %s (the image's USER) and an fsGroup", sc, image.uid)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != image.volume || len(spec.VolumeClaimTemplates) != 1 ||
		spec.VolumeClaimTemplates[0].Name != c.VolumeMounts[0].Name {
		t.Errorf("volumeMounts %+v, claims %d: want the image's %s on a volume claimed per pod", c.VolumeMounts, len(spec.VolumeClaimTemplates), image.volume)
	}
	var ports []string
	for _, p := range c.Ports {
		proto := strings.ToLower(string(p.Protocol))
		if proto == "" {
			proto = "tcp"
		}
		ports = append(ports, fmt.Sprintf("%d/%s", p.ContainerPort, proto))
	}
	slices.Sort(ports)
	if !slices.Equal(ports, image.ports) {
		t.Errorf("container ports %v, the image exposes %v", ports, image.ports)
	}

	// At most one server down for voluntary disruptions.
	pdb := o.pdbs[0]
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil ||
		!selects(pdb.Spec.Selector.MatchLabels, labels) {
		t.Errorf("PodDisruptionBudget %+v: want maxUnavailable 1 over the pods", pdb.Spec)
	}
}

// selects reports whether a selector's labels all match the pod's.
func selects(sel, pod map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if pod[k] != v {
			return false
		}
	}
	return true
}

// serveFlags reads the flag names seqd serve defines from its source.
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../cmd/seqd/serve.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`fs\.\w+\("([a-z0-9-]+)"`).FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = true
	}
	if !out["join"] || !out["advertise-raft"] {
		t.Fatalf("found no serve flags in cmd/seqd/serve.go: %v", out)
	}
	return out
}

type layout struct {
	uid, volume string
	ports       []string
}

// imageLayout reads the user, the volume and the exposed ports from the
// Dockerfile (deploy/layout_test.go keeps the CI image's the same).
func imageLayout(t *testing.T) layout {
	t.Helper()
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var l layout
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "USER":
			l.uid, _, _ = strings.Cut(f[1], ":")
		case "VOLUME":
			l.volume = f[1]
		case "EXPOSE":
			for _, p := range f[1:] {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				l.ports = append(l.ports, p)
			}
		}
	}
	slices.Sort(l.ports)
	return l
}
