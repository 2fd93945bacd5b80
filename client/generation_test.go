package client_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqd/seqd/api"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// A stream checks the generation on every answer, not only when it opens: a
// client streaming to a cluster S meets the generation of R, a restore of
// S's backup (as from an answer of R), while its stream to S is open. S has
// not heard of R; its next answer on that stream must not reach a caller (a
// value from S may lie below values R handed out), and the call retried on a
// new request names R's generation, which fences S. On both transports of
// NextStream.
func TestAnOpenStreamStopsAtANewerGeneration(t *testing.T) {
	for _, tr := range []struct {
		name string
		opts client.Options
	}{
		{"framed", client.Options{}},
		{"connect", client.Options{HTTPClient: api.NewH2CClient()}},
	} {
		t.Run(tr.name, func(t *testing.T) {
			s := testcluster.Start(t, 1, testcluster.Options{})
			s.WaitServingLeader(30 * time.Second)
			opts := tr.opts
			opts.RetryFor = 2 * time.Second
			cl, err := client.New(s.APIAddrs(), opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			deadline := time.Now().Add(30 * time.Second)
			for cl.BatchStats().Streamed == 0 { // the stream opens in the background
				if time.Now().After(deadline) {
					t.Fatal("no request went on a stream")
				}
				if _, err := cl.Next(ctx, "", 7); err != nil {
					t.Fatal(err)
				}
			}

			file := filepath.Join(t.TempDir(), "backup.db")
			f, err := os.Create(file)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cl.Backup(ctx, f); err != nil {
				t.Fatal(err)
			}
			f.Close()
			r := testcluster.StartRestored(t, file, 0, testcluster.Options{})
			r.WaitServingLeader(30 * time.Second)
			gen := r.Nodes[0].Node().Generation()
			if err := cl.MeetGeneration(gen.String()); err != nil {
				t.Fatal(err)
			}

			streamed := cl.BatchStats().Streamed
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if v, err := cl.Next(cctx, "", 7); err == nil {
				t.Fatalf("the client returned %v from S after it met R's generation %v (streamed before: %d, after: %d)", v, gen, streamed, cl.BatchStats().Streamed)
			}
			if !s.Nodes[0].Node().Fenced() {
				t.Fatal("S was not fenced by the retried call's generation")
			}
		})
	}
}
