package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	healthv1 "github.com/seqd/seqd/api/gen/grpc/health/v1"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/cli"
)

// loopback is addr with an unspecified host (0.0.0.0, ::, none) replaced by
// 127.0.0.1: where a server listening on every address is reached locally.
func loopback(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

func cmdHealth(args []string) error {
	fs := cli.NewFlagSet("health", "seqd health [--addr A] [--service S]",
		"Asks one node for its standard gRPC health status. Exits 0 when SERVING, 1 otherwise\n"+
			"(for container health checks and scripts). Without --addr (or SEQD_ADDR) it asks the node\n"+
			"this environment's SEQD_API_ADDR serves, on loopback when that listens on every address:\n"+
			"a container's health check follows the API address the container was given.")
	service := fs.String("service", "seq.v1.SequenceService", "service to ask about (\"\" for the server)")
	cf := addClientFlags(fs)
	*cf.timeout = 3 * time.Second
	if a := os.Getenv("SEQD_API_ADDR"); a != "" {
		*cf.addr = loopback(a)
	}
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 0 {
		return cli.Usagef("health takes no arguments")
	}
	opts, err := cf.options()
	if err != nil {
		return err
	}
	opts.Protocol = client.GRPC // the standard gRPC health check, as container runtimes make it
	c, err := cf.newClient(opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *cf.timeout)
	defer cancel()
	st, err := c.Health(ctx, *service)
	if err != nil {
		return cli.CallError(err)
	}
	fmt.Println(st)
	if st != healthv1.HealthCheckResponse_SERVING {
		return fmt.Errorf("%s is %s", strings.TrimSpace(strings.Split(*cf.addr, ",")[0]), st)
	}
	return nil
}
