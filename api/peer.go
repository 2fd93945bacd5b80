package api

import (
	"context"
	"crypto/tls"
	"net/http"

	"connectrpc.com/connect"
)

// Peers says how this node calls the other nodes' APIs (to forward calls,
// gather ClusterStatus, and for the leader's membership checks).
type Peers struct {
	// HTTP is the client; nil means NewH2CClient() (or an HTTP/2 TLS client
	// when TLS is set).
	HTTP *http.Client
	// TLS, when set, makes peer calls over HTTPS with this configuration
	// (its RootCAs must trust the other nodes' API certificates).
	TLS *tls.Config
	// Token, when set, is sent as a bearer token on internal calls.
	Token string
}

func (p Peers) scheme() string {
	if p.TLS != nil {
		return "https://"
	}
	return "http://"
}

func (p Peers) client() *http.Client {
	if p.HTTP != nil {
		return p.HTTP
	}
	if p.TLS != nil {
		var protos http.Protocols
		protos.SetHTTP2(true)
		protos.SetHTTP1(true)
		return &http.Client{Transport: &http.Transport{TLSClientConfig: p.TLS, Protocols: &protos, MaxIdleConnsPerHost: 64}}
	}
	return NewH2CClient()
}

func (p Peers) options() []connect.ClientOption {
	if p.Token == "" {
		return nil
	}
	return []connect.ClientOption{connect.WithInterceptors(bearer(p.Token))}
}

// bearer adds an Authorization header to outgoing unary and streaming calls.
type bearer string

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Header().Get("Authorization") == "" {
			req.Header().Set("Authorization", "Bearer "+string(b))
		}
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", "Bearer "+string(b))
		return conn
	}
}

func (b bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// BearerToken returns a client interceptor that sends token as a bearer token.
func BearerToken(token string) connect.Interceptor { return bearer(token) }
