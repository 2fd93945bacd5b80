package main

import (
	"context"
	"crypto/tls"
	"flag"
	"strings"
	"time"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/cli"
)

// clientFlags are the flags every client command takes.
type clientFlags struct {
	addr     *string
	timeout  *time.Duration
	protocol *string
	tlsCA    *string
	token    *string
}

func addClientFlags(fs *flag.FlagSet) clientFlags {
	return clientFlags{
		addr:     fs.String("addr", "127.0.0.1:7700", "comma-separated API addresses of cluster nodes"),
		timeout:  fs.Duration("timeout", 10*time.Second, "how long the call may take, retries included"),
		protocol: fs.String("protocol", "connect", "wire protocol: connect, grpc or grpcweb"),
		tlsCA:    fs.String("tls-ca", "", "CA bundle (PEM) of a cluster that serves TLS (implies https)"),
		token:    fs.String("token", "", "bearer token of a cluster that requires one (prefer SEQD_TOKEN)"),
	}
}

// options returns the client options for the flags: h2c by default, HTTPS
// (HTTP/2) with --tls-ca, and a bearer token on every call with --token.
func (f clientFlags) options() (client.Options, error) {
	// One command makes one or two calls: following the nodes' leader hints
	// is enough, a routing table refresh would only add a ClusterStatus.
	opts := client.Options{Protocol: client.Protocol(*f.protocol), RetryFor: *f.timeout, HTTP2: true,
		DisableRouting: true, Token: *f.token}
	if *f.tlsCA != "" {
		pool, err := cli.LoadCA(*f.tlsCA)
		if err != nil {
			return opts, err
		}
		opts.TLS = &tls.Config{RootCAs: pool}
	}
	return opts, nil
}

// newClient returns the client for the flags' addresses and options.
func (f clientFlags) newClient(opts client.Options) (*client.Client, error) {
	c, err := client.New(strings.Split(*f.addr, ","), opts)
	if err != nil {
		return nil, cli.Usagef("%v", err)
	}
	return c, nil
}

func (f clientFlags) dial() (*client.Client, context.Context, context.CancelFunc, error) {
	opts, err := f.options()
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := f.newClient(opts)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *f.timeout)
	return c, ctx, cancel, nil
}
