package api

import (
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/seqd/seqd"
)

// answerHeaders caches the values of the headers a leader puts on every
// SequenceService answer, so that an answer costs no allocation for them
// (net/http never modifies a header's value slice, so one slice is shared).
type answerHeaders struct {
	servedBy []string
	routing  atomic.Pointer[routingHeader]
}

type routingHeader struct {
	version uint64
	value   []string
}

// setAnswerHeaders adds Seqd-Served-By and Seqd-Routing-Version to h. The
// version is cluster.Node.RoutingVersion, as ClusterStatus reports it.
func (s *Server) setAnswerHeaders(h http.Header) {
	a := &s.answerHdrs
	h[seqd.HeaderServedBy] = a.servedBy // set by New
	v := s.node.RoutingVersion()
	r := a.routing.Load()
	if r == nil || r.version != v {
		r = &routingHeader{version: v, value: []string{strconv.FormatUint(v, 10)}}
		a.routing.Store(r)
	}
	h[seqd.HeaderRoutingVersion] = r.value
}
