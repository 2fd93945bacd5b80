package client_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/proctest"
	"github.com/seqd/seqd/internal/testcluster"
)

// TestClientLogsOnlyToItsLogger: an embedded generator logs its grants to
// Options.Logger, and without one the client writes nothing, not even to
// the application's default slog logger.
func TestClientLogsOnlyToItsLogger(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	c.WaitServingLeader(20 * time.Second)
	var appDefault proctest.SyncBuffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&appDefault, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })

	// Namespaces only these generators use: their lines are theirs alone.
	issue := func(opts client.Options, namespace string) {
		t.Helper()
		cl, err := client.New(c.APIAddrs(), opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		g := cl.NewGenerator(namespace, client.GeneratorOptions{})
		for {
			_, err := cl.CreateNamespace(ctx, &seqv1.CreateNamespaceRequest{Name: namespace})
			if err == nil {
				_, err = g.Next(ctx)
			}
			if err == nil {
				break
			} else if ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := g.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	issue(client.Options{}, "silent")
	var given proctest.SyncBuffer
	issue(client.Options{Logger: slog.New(slog.NewTextHandler(&given, nil))}, "told")

	if strings.Contains(appDefault.String(), "namespace=silent") || strings.Contains(appDefault.String(), "namespace=told") {
		t.Errorf("the client wrote to the default logger:\n%s", appDefault.String())
	}
	if !strings.Contains(given.String(), "flake worker acquired") || !strings.Contains(given.String(), "namespace=told") {
		t.Errorf("the given logger got no grant line:\n%s", given.String())
	}
}
