package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/internal/testcluster"
)

// post sends body to path with the given Content-Type ("" sends none) and
// returns the status, the Content-Type and the body of the answer.
func post(t *testing.T, base, path, contentType string, body []byte) (int, string, string) {
	t.Helper()
	// A 503 (unavailable: the node is between leases, a renewal slowed by a
	// loaded machine) is retried, as every client does; these tests are
	// about the answers of a serving node.
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// connectErr decodes a Connect JSON error body.
func connectErr(t *testing.T, body string) (code, message string) {
	t.Helper()
	var e struct{ Code, Message string }
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("not a Connect error: %q", body)
	}
	return e.Code, e.Message
}

// TestFrontDoorErrors calls a real node the way a person with curl or a
// generic HTTP client does, and checks each answer's status, code and text.
func TestFrontDoorErrors(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	c.WaitServingLeader(20 * time.Second)
	base := "http://" + c.Nodes[0].APIAddr
	const next = "/seq.v1.SequenceService/Next"
	const js = "application/json"

	t.Run("unknown JSON field is refused, naming it and the fields there are", func(t *testing.T) {
		for _, path := range []string{next, "/seq.v1.IdService/NextIds", "/seq.v1.AdminService/ListSpaces", "/grpc.health.v1.Health/Check"} {
			status, _, body := post(t, base, path, js, []byte(`{"spce":"default","keys":[1]}`))
			code, msg := connectErr(t, body)
			if status != http.StatusBadRequest || code != "invalid_argument" || !strings.Contains(msg, `unknown field "spce"`) {
				t.Errorf("%s: %d %s %q; want 400 invalid_argument naming spce", path, status, code, msg)
			}
		}
		_, _, body := post(t, base, next, js, []byte(`{"spce":"default","keys":[1]}`))
		if _, msg := connectErr(t, body); !strings.Contains(msg, "its fields are space, keys") {
			t.Errorf("the message does not list NextRequest's fields: %q", msg)
		}
		// The same with charset, as browsers and some clients send it.
		status, _, body := post(t, base, next, "application/json; charset=utf-8", []byte(`{"spce":"default","keys":[1]}`))
		if code, _ := connectErr(t, body); status != 400 || code != "invalid_argument" {
			t.Errorf("application/json; charset=utf-8: %d %s", status, code)
		}
		// A correct body still works, and its answer has every field.
		status, _, body = post(t, base, next, js, []byte(`{"space":"default","keys":[1]}`))
		if status != 200 || !strings.Contains(body, `"values":["1"]`) {
			t.Errorf("a correct Next: %d %q", status, body)
		}
	})

	t.Run("binary protobuf keeps unknown fields working", func(t *testing.T) {
		// Field 99 is unknown to NextRequest: a newer client's field.
		msg, _ := proto.Marshal(&seqv1.NextRequest{Space: "default", Keys: []uint64{2}})
		msg = protowire.AppendTag(msg, 99, protowire.VarintType)
		msg = protowire.AppendVarint(msg, 1)
		status, _, body := post(t, base, next, "application/proto", msg)
		var out seqv1.NextResponse
		if status != 200 || proto.Unmarshal([]byte(body), &out) != nil || len(out.GetValues()) != 1 {
			t.Fatalf("binary Next with an unknown field: %d %q", status, body)
		}
	})

	t.Run("a string key says keys are unsigned integers", func(t *testing.T) {
		status, _, body := post(t, base, next, js, []byte(`{"keys":["a"]}`))
		code, msg := connectErr(t, body)
		if status != 400 || code != "invalid_argument" || !strings.Contains(msg, `keys are unsigned integers, got "a"`) || strings.Contains(msg, "seqv1") || strings.Contains(msg, "proto:") {
			t.Errorf("%d %s %q", status, code, msg)
		}
		_, _, body = post(t, base, "/seq.v1.SequenceService/Reserve", js, []byte(`{"key":1,"count":true}`))
		if _, msg := connectErr(t, body); !strings.Contains(msg, "count is an unsigned integer, got true") {
			t.Errorf("Reserve with count true: %q", msg)
		}
	})

	t.Run("no Content-Type gets 415 with a line naming the types", func(t *testing.T) {
		for _, ct := range []string{"", "text/plain"} {
			status, _, body := post(t, base, next, ct, []byte(`{"keys":[1]}`))
			if status != http.StatusUnsupportedMediaType || !strings.Contains(body, "application/json") ||
				strings.Count(strings.TrimSpace(body), "\n") != 0 {
				t.Errorf("Content-Type %q: %d %q; want 415 and one line", ct, status, body)
			}
		}
	})

	t.Run("an unknown path gets 404 with a line naming what is served", func(t *testing.T) {
		for _, path := range []string{"/nope", "/seq.v1.SequenceService/Nope", "/"} {
			status, ct, body := post(t, base, path, js, []byte(`{}`))
			if status != 404 || !strings.HasPrefix(ct, "text/plain") || !strings.Contains(body, "no such path "+path+":") ||
				!strings.Contains(body, "/ui/") || strings.Count(strings.TrimSpace(body), "\n") != 0 {
				t.Errorf("%s: %d %q; want 404 and one line", path, status, body)
			}
		}
		// A not_found of the API itself stays a Connect error.
		status, _, body := post(t, base, next, js, []byte(`{"space":"nope","keys":[1]}`))
		if code, _ := connectErr(t, body); status != 404 || code != "not_found" {
			t.Errorf("unknown space: %d %q", status, body)
		}
	})

	t.Run("a body over 4 MiB is invalid_argument, HTTP 400, never 429", func(t *testing.T) {
		// 429 (resource_exhausted's HTTP status) tells generic clients to
		// retry; the same body never fits, so the answer is a 400.
		big := []byte(`{"keys":[` + strings.Repeat("1,", 2_200_000) + `1]}`)
		status, _, body := post(t, base, next, js, big)
		code, msg := connectErr(t, body)
		if status != http.StatusBadRequest || code != "invalid_argument" || !strings.Contains(msg, "request body over 4194304 bytes") {
			t.Errorf("%d %s %q", status, code, msg)
		}
		// Over gRPC-Web and binary Connect too (the Go client's default).
		cl := seqv1connect.NewSequenceServiceClient(http.DefaultClient, base, connect.WithGRPCWeb())
		_, err := cl.Next(context.Background(), connect.NewRequest(&seqv1.NextRequest{Keys: make([]uint64, 600_000)}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("gRPC-Web, a 5 MB body: %v", err)
		}
		// Just under the limit the body is read (and refused for its keys).
		_, _, body = post(t, base, next, js, []byte(`{"keys":[`+strings.Repeat("1,", 20_000)+`1]}`))
		if _, msg := connectErr(t, body); !strings.Contains(msg, "at most 10000") {
			t.Errorf("a body under the limit: %q", msg)
		}
	})

	t.Run("messages say their code once", func(t *testing.T) {
		_, _, body := post(t, base, "/seq.v1.IdService/NextIds", js, []byte(`{"count":20000}`))
		code, msg := connectErr(t, body)
		if code != "invalid_argument" || strings.HasPrefix(msg, "invalid argument") || !strings.HasPrefix(msg, "count must be 1 to 10000") {
			t.Errorf("NextIds count 20000: %s %q", code, msg)
		}
	})

	t.Run("NextIds without a count issues one id", func(t *testing.T) {
		status, _, body := post(t, base, "/seq.v1.IdService/NextIds", js, []byte(`{}`))
		var out struct{ Ids []string }
		if status != 200 || json.Unmarshal([]byte(body), &out) != nil || len(out.Ids) != 1 {
			t.Fatalf("NextIds {}: %d %q", status, body)
		}
	})

	t.Run("Decode over JSON has every field, zeros included", func(t *testing.T) {
		_, _, body := post(t, base, "/seq.v1.IdService/NextIds", js, []byte(`{"count":1}`))
		var ids struct{ Ids []string }
		if err := json.Unmarshal([]byte(body), &ids); err != nil || len(ids.Ids) != 1 {
			t.Fatalf("NextIds: %q", body)
		}
		_, _, body = post(t, base, "/seq.v1.IdService/Decode", js, []byte(`{"id":"`+ids.Ids[0]+`"}`))
		var d map[string]any
		if err := json.Unmarshal([]byte(body), &d); err != nil {
			t.Fatalf("Decode: %q", body)
		}
		// The first id of a fresh node: worker 0, sequence 0.
		for _, f := range []string{"unixMs", "worker", "sequence", "holderLabel", "warning"} {
			if _, ok := d[f]; !ok {
				t.Errorf("Decode answered %q without %s", body, f)
			}
		}
	})

	t.Run("already_exists names the settings", func(t *testing.T) {
		_, _, body := post(t, base, "/seq.v1.AdminService/CreateSpace", js, []byte(`{"name":"default","step":7}`))
		code, msg := connectErr(t, body)
		want := `"default" has step 10000 and section_size 100000; this call asked for step 7 and section_size 100000`
		if code != "already_exists" || !strings.Contains(msg, want) {
			t.Errorf("CreateSpace default step 7: %s %q; want %q", code, msg, want)
		}
		post(t, base, "/seq.v1.AdminService/CreateNamespace", js, []byte(`{"name":"orders","layout":"sonyflake"}`))
		_, _, body = post(t, base, "/seq.v1.AdminService/CreateNamespace", js, []byte(`{"name":"orders","layout":"js"}`))
		code, msg = connectErr(t, body)
		want = `"orders" has layout sonyflake, obfuscation none; this call asked for layout js, obfuscation none`
		if code != "already_exists" || !strings.Contains(msg, want) {
			t.Errorf("CreateNamespace orders js: %s %q; want %q", code, msg, want)
		}
	})

	t.Run("instants are dates", func(t *testing.T) {
		// A layout whose life ended: 20 bits of 1 ms from 1970 end in 1970.
		_, _, body := post(t, base, "/seq.v1.AdminService/CreateNamespace", js,
			[]byte(`{"name":"old","timeBits":20,"workerBits":10,"sequenceBits":12,"unitMs":1,"epochUnixMs":"1"}`))
		code, msg := connectErr(t, body)
		if code != "resource_exhausted" || !strings.Contains(msg, "ended at 1970-01-01T00:17:28.577Z") {
			t.Errorf("an ended layout: %s %q", code, msg)
		}
	})
}
