package cluster

import (
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Names in addresses. --join and the advertised raft and gossip addresses
// may be DNS names (a Kubernetes StatefulSet's pods, seqd-0.seqd-peers...),
// and such names may resolve only a while after a server starts: a pod's
// own record appears once the pod has an IP, and the other pods' as they are
// scheduled, in any order. So:
//
//   - a --join name is resolved again on every pass of the host loop (once
//     a second), never only once at start;
//   - an advertised name is waited for at start (up to resolveWait) and must
//     resolve to a routable IP. The raft address stays the name: raft dials
//     it and resolves it anew on every connection, so a server whose IP
//     changes (a pod rescheduled) is found again without a configuration
//     change. Gossip advertises the IP the name resolved to (memberlist
//     publishes IPs only).

// resolveWait bounds how long a server waits at start for its advertised
// names to resolve: a name that never resolves is a configuration error.
const resolveWait = 2 * time.Minute

// resolveEvery is how often such a name is tried again meanwhile.
const resolveEvery = 500 * time.Millisecond

// hostAddr is a net.Addr that keeps a host name as it was given (raft's
// advertised address when --advertise-raft names a host).
type hostAddr string

func (a hostAddr) Network() string { return "tcp" }
func (a hostAddr) String() string  { return string(a) }

// advertised returns the address other servers dial for addr (host:port):
// addr itself when its host is an IP, else, once the name resolves to a
// routable IP, the name (raft) or that IP (gossip, keepName false). It waits
// up to wait, logging once that it waits, and fails on an unspecified IP or
// a name that did not resolve in time.
func advertised(log *slog.Logger, what, addr string, keepName bool, wait time.Duration) (net.Addr, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %s advertise address %q is not host:port", ErrInvalidConfig, what, addr)
	}
	deadline := time.Now().Add(wait)
	for logged := false; ; {
		r, err := net.ResolveTCPAddr("tcp", addr)
		if err == nil {
			if r.IP == nil || r.IP.IsUnspecified() {
				return nil, fmt.Errorf("%w: %s advertise address %q must be a routable IP or a name of one", ErrInvalidConfig, what, addr)
			}
			if keepName && net.ParseIP(host) == nil {
				return hostAddr(net.JoinHostPort(host, portStr)), nil
			}
			return r, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: %s advertise address %q did not resolve within %v: %v", ErrInvalidConfig, what, addr, wait, err)
		}
		if !logged {
			log.Info("waiting for the advertised name to resolve (a DNS record not published yet)", "what", what, "addr", addr, "err", err)
			logged = true
		}
		time.Sleep(resolveEvery)
	}
}

// resolveHostPort resolves addr to ip:port, or returns it as it is when it
// does not resolve (yet).
func resolveHostPort(addr string) string {
	if r, err := net.ResolveTCPAddr("tcp", addr); err == nil {
		return r.String()
	}
	return addr
}
