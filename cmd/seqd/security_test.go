package main_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"github.com/seqd/seqd/client"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/api"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/internal/proctest"
)

// testCA makes a CA and issues certificates for 127.0.0.1.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
	pem  string // path of the CA certificate
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, dir: t.TempDir()}
	ca.pem = filepath.Join(ca.dir, "ca.pem")
	writePEM(t, ca.pem, "CERTIFICATE", der)
	return ca
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// issue returns the paths of a certificate and key for 127.0.0.1, usable as
// server and client certificate.
func (ca *testCA) issue(t *testing.T, name string) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(ca.dir, name+".pem"), filepath.Join(ca.dir, name+"-key.pem")
	writePEM(t, certPath, "CERTIFICATE", der)
	writePEM(t, keyPath, "EC PRIVATE KEY", kder)
	return certPath, keyPath
}

// caPool returns a pool of the certificates in the PEM file at caPath.
func caPool(t *testing.T, caPath string) *x509.CertPool {
	t.Helper()
	pemBytes, err := os.ReadFile(caPath)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	return pool
}

func tlsClient(t *testing.T, caPath string) *http.Client {
	t.Helper()
	pool := caPool(t, caPath)
	var p http.Protocols
	p.SetHTTP2(true)
	p.SetHTTP1(true)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Protocols: &p}}
}

// TestSecurity runs a 3-node cluster with TLS on the API, mutual TLS between
// servers' raft, encrypted gossip and a bearer token on every service; then
// checks that calls without the token are refused with unauthenticated, that
// plain HTTP and an untrusted CA fail, and that servers with a certificate
// from another CA or without the gossip key cannot join or read.
func TestSecurity(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	ca := newTestCA(t, "seqd-test-ca")
	key := make([]byte, 32)
	rand.Read(key)
	gossipKey := base64.StdEncoding.EncodeToString(key)
	const token = "s3cret-token"

	ps := proctest.New(t, 3, "--lease", "500ms", "--raft-heartbeat-timeout", "300ms",
		"--raft-election-timeout", "300ms", "--raft-leader-lease-timeout", "150ms")
	addFlags := func(p *proctest.Proc, ca *testCA, gkey string) {
		cert, k := ca.issue(t, p.ID)
		p.Args = append(p.Args, "--tls-cert", cert, "--tls-key", k, "--tls-ca", ca.pem,
			"--raft-tls-cert", cert, "--raft-tls-key", k, "--raft-tls-ca", ca.pem,
			"--gossip-key", gkey, "--token-sequence")
	}
	for _, p := range ps {
		addFlags(p, ca, gossipKey)
	}
	env := []string{"SEQD_TOKEN=" + token}
	for _, p := range ps {
		p.Env = env
		p.Start(t)
	}

	h := tlsClient(t, ca.pem)
	authed := connect.WithInterceptors(api.BearerToken(token))
	seqClient := func(addr string, opts ...connect.ClientOption) seqv1connect.SequenceServiceClient {
		return seqv1connect.NewSequenceServiceClient(h, "https://"+addr, opts...)
	}
	admin := seqv1connect.NewAdminServiceClient(h, "https://"+ps[0].API, authed)
	ctx := context.Background()

	// Wait until the cluster serves (through any node, with the token).
	deadline := time.Now().Add(30 * time.Second)
	var last []uint64
	for {
		r, err := seqClient(ps[1].API, authed).Next(ctx, connect.NewRequest(&seqv1.NextRequest{Keys: []uint64{1}}))
		if err == nil {
			last = r.Msg.GetValues()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("secure cluster never served: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Every node answers over TLS with the token (followers forward it).
	for _, p := range ps {
		r, err := seqClient(p.API, authed).Next(ctx, connect.NewRequest(&seqv1.NextRequest{Keys: []uint64{1}}))
		if err != nil {
			t.Fatalf("via %s: %v", p.ID, err)
		}
		if r.Msg.GetValues()[0] <= last[0] {
			t.Fatalf("via %s: %v after %v", p.ID, r.Msg.GetValues(), last)
		}
		last = r.Msg.GetValues()
	}
	if _, err := admin.ListSpaces(ctx, connect.NewRequest(&seqv1.ListSpacesRequest{})); err != nil {
		t.Fatalf("admin with token: %v", err)
	}

	// The Go client streams its coalesced Next calls over TLS with the
	// token (NextStream's framed transport: an HTTP/1.1 upgrade); without
	// the token the upgrade is refused and the calls fail unauthenticated.
	streamOverTLS(t, ca.pem, token, []string{ps[0].API, ps[1].API, ps[2].API})

	// Without the token, or with a wrong one: unauthenticated.
	noToken := seqv1connect.NewAdminServiceClient(h, "https://"+ps[0].API)
	if _, err := noToken.ListSpaces(ctx, connect.NewRequest(&seqv1.ListSpacesRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("admin without token: %v, want unauthenticated", err)
	}
	if _, err := seqClient(ps[2].API).Next(ctx, connect.NewRequest(&seqv1.NextRequest{Keys: []uint64{1}})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("sequence call without token: %v, want unauthenticated", err)
	}
	wrong := connect.WithInterceptors(api.BearerToken("guess"))
	if _, err := seqClient(ps[2].API, wrong).Next(ctx, connect.NewRequest(&seqv1.NextRequest{Keys: []uint64{1}})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("sequence call with a wrong token: %v, want unauthenticated", err)
	}
	// Plain HTTP, and a client that does not trust the CA, get nothing.
	plain := seqv1connect.NewSequenceServiceClient(&http.Client{Timeout: 3 * time.Second}, "http://"+ps[0].API, authed)
	if _, err := plain.Next(ctx, connect.NewRequest(&seqv1.NextRequest{Keys: []uint64{1}})); err == nil {
		t.Fatal("plain HTTP was served")
	}
	other := newTestCA(t, "other-ca")
	untrusting := seqv1connect.NewSequenceServiceClient(tlsClient(t, other.pem), "https://"+ps[0].API, authed)
	if _, err := untrusting.Next(ctx, connect.NewRequest(&seqv1.NextRequest{Keys: []uint64{1}})); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client that does not trust the CA: %v", err)
	}

	// The command line, over TLS with the token from the environment.
	if out, errOut, code := runCLI(t, env, "next", "--addr", ps[0].API, "--tls-ca", ca.pem, "5"); code != 0 {
		t.Fatalf("seqd next over TLS with a token: exit %d %s %s", code, out, errOut)
	}
	if out, _, code := runCLI(t, env, "health", "--addr", ps[1].API, "--tls-ca", ca.pem); code != 0 || !strings.Contains(out, "SERVING") {
		t.Fatalf("seqd health over TLS: exit %d %s", code, out)
	}
	if _, errOut, code := runCLI(t, nil, "status", "--addr", ps[0].API, "--tls-ca", ca.pem, "--timeout", "2s"); code != 1 || !strings.Contains(errOut, "unauthenticated") {
		t.Fatalf("seqd status without the token: exit %d %s", code, errOut)
	}
	if out, errOut, code := runCLI(t, env, "status", "--addr", ps[0].API, "--tls-ca", ca.pem); code != 0 || !strings.Contains(out, "leader:") {
		t.Fatalf("seqd status over TLS with the token: exit %d %s %s", code, out, errOut)
	}
	// A backup streams from the leader: asked through a follower, the CLI
	// follows the leader hint (host:port) over TLS, with the token.
	for _, p := range ps {
		file := filepath.Join(t.TempDir(), "backup-via-"+p.ID)
		if out, errOut, code := runCLI(t, env, "backup", "--addr", p.API, "--tls-ca", ca.pem, file); code != 0 || !strings.Contains(out, "wrote") {
			t.Fatalf("seqd backup via %s over TLS with the token: exit %d %s %s", p.ID, code, out, errOut)
		}
	}

	// Intruders: one with a raft certificate from another CA (right gossip
	// key), one without the gossip key (right certificates).
	var joins []string
	for _, p := range ps {
		joins = append(joins, p.Gossip)
	}
	intruders := proctest.New(t, 2)
	for i, p := range intruders {
		p.ID = fmt.Sprintf("intruder%d", i+1)
		p.Args = []string{"serve", "--id", p.ID, "--data-dir", p.Dir, "--api-addr", p.API, "--raft-addr", p.Raft,
			"--gossip-addr", p.Gossip, "--join", strings.Join(joins, ","), "--bootstrap-expect", "3"}
		p.Env = env
	}
	addFlags(intruders[0], other, gossipKey)
	otherKey := make([]byte, 32)
	rand.Read(otherKey)
	addFlags(intruders[1], ca, base64.StdEncoding.EncodeToString(otherKey))
	for _, p := range intruders {
		p.Start(t)
	}
	// Observe for a while: neither becomes a voter nor receives state; the
	// one without the gossip key is not even seen.
	until := time.Now().Add(6 * time.Second)
	for time.Now().Before(until) {
		st, err := admin.ClusterStatus(ctx, connect.NewRequest(&seqv1.ClusterStatusRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range st.Msg.GetNodes() {
			switch n.GetId() {
			case "intruder1":
				if n.GetVoter() || n.GetAppliedIndex() > 0 {
					t.Fatalf("a server with a foreign raft certificate joined: %v", n)
				}
			case "intruder2":
				t.Fatalf("a server without the gossip key was seen: %v", n)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Asked directly, the intruder with the foreign certificate holds no
	// state: raft never let it read anything.
	direct := seqv1connect.NewAdminServiceClient(tlsClient(t, other.pem), "https://"+intruders[0].API, authed)
	st, err := direct.ClusterStatus(ctx, connect.NewRequest(&seqv1.ClusterStatusRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Msg.GetNodes() {
		if n.GetId() == "intruder1" && (n.GetAppliedIndex() != 0 || n.GetInConfiguration()) {
			t.Fatalf("the intruder holds state: %v", n)
		}
	}
	if st.Msg.GetLeaderId() != "" {
		t.Fatalf("the intruder knows the leader %q", st.Msg.GetLeaderId())
	}
}

// streamOverTLS runs 16 callers of the Go client (TLS, the token) until
// some of their coalesced requests went as stream messages, checking that
// each key's values increase; then a client without the token.
func streamOverTLS(t *testing.T, caPath, token string, addrs []string) {
	t.Helper()
	pool := caPool(t, caPath)
	cl, err := client.New(addrs, client.Options{TLS: &tls.Config{RootCAs: pool}, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for cl.BatchStats().Streamed < 100 {
		if time.Now().After(deadline) {
			t.Fatalf("no stream messages over TLS in 30s: %+v", cl.BatchStats())
		}
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for w := range 16 {
			wg.Go(func() {
				var last uint64
				for range 50 {
					v, err := cl.Next(ctx, "", uint64(1000+w))
					if err == nil && v[0] <= last {
						err = fmt.Errorf("key %d: %d after %d", 1000+w, v[0], last)
					}
					if err != nil {
						errs <- err
						return
					}
					last = v[0]
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	anon, err := client.New(addrs, client.Options{TLS: &tls.Config{RootCAs: pool}, RetryFor: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anon.Next(ctx, "", 1); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("the Go client without the token: %v, want unauthenticated", err)
	}
}
