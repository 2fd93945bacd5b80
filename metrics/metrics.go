// Package metrics exposes seqd's Prometheus metrics at /metrics: RPCs by
// procedure and code with latency histograms, values issued, raises of the
// high-water marks (raft entries) and their latency, lease state and
// renewals, leader changes, failover time, keys held in memory, and raft's
// own metrics (through hashicorp/go-metrics).
//
// Names start with seqd_; raft's keep go-metrics' names under seqd_raft_...
package metrics

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"
	gometrics "github.com/hashicorp/go-metrics"
	gmprom "github.com/hashicorp/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/cluster"
)

// ServedByHeader marks a response computed on this node (as opposed to
// forwarded to the leader), so that values are counted once, where issued.
const ServedByHeader = seqd.HeaderServedBy

// Metrics holds seqd's collectors and their registry.
type Metrics struct {
	reg *prometheus.Registry

	rpcs      *prometheus.CounterVec
	rpcTime   *prometheus.HistogramVec
	issued    *prometheus.CounterVec
	raises    *prometheus.CounterVec
	marks     prometheus.Counter
	raiseTime prometheus.Histogram

	// NextAnswered's series, resolved once (it runs per stream message).
	nextOK     prometheus.Counter
	nextTime   prometheus.Observer
	nextIssued prometheus.Counter

	mu    sync.Mutex
	node  Source
	flake func() []FlakeStat
}

var raftSinkOnce sync.Once

// New returns metrics registered in a fresh registry (plus Go runtime and
// process collectors, and raft's metrics, which hashicorp/raft reports
// through the process-wide go-metrics sink installed on the first call).
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.rpcs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seqd_rpc_requests_total", Help: "RPCs handled, by procedure and Connect code (ok for success); every NextStream message counts as a Next call, and the stream once as NextStream.",
	}, []string{"procedure", "code"})
	m.rpcTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "seqd_rpc_duration_seconds", Help: "RPC latency as seen by the server, by procedure (a NextStream message's as a Next call's).",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"procedure"})
	m.issued = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seqd_values_issued_total", Help: "Sequence values issued by this node as leader, by call kind.",
	}, []string{"call"})
	m.raises = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seqd_raises_total", Help: "Raft entries raising high-water marks, by result.",
	}, []string{"result"})
	m.marks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seqd_raise_marks_total", Help: "Section high-water marks raised (several may share one entry).",
	})
	m.raiseTime = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "seqd_raise_duration_seconds", Help: "Time to commit one raise entry through raft.",
		Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
	})
	m.nextOK = m.rpcs.WithLabelValues(seqv1connect.SequenceServiceNextProcedure, "ok")
	m.nextTime = m.rpcTime.WithLabelValues(seqv1connect.SequenceServiceNextProcedure)
	m.nextIssued = m.issued.WithLabelValues("next")
	m.reg.MustRegister(m.rpcs, m.rpcTime, m.issued, m.raises, m.marks, m.raiseTime,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		nodeCollector{m})
	raftSinkOnce.Do(func() {
		sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Expiration: time.Minute, Registerer: prometheus.NewRegistry()})
		if err == nil {
			raftSink = sink
			conf := gometrics.DefaultConfig("seqd")
			conf.EnableHostname = false
			conf.EnableRuntimeMetrics = false
			_, _ = gometrics.NewGlobal(conf, sink)
		}
	})
	if raftSink != nil {
		m.reg.MustRegister(raftSink)
	}
	return m
}

var raftSink *gmprom.PrometheusSink

// FlakeStat is one namespace's holder on this node (see api.FlakeStat).
type FlakeStat struct {
	Namespace                         string
	Issued, Fenced                    uint64
	Workers                           int
	Capacity                          uint64
	RangeRemaining, Lead, LastRenewal time.Duration
	LifetimeRemaining                 time.Duration
}

// SetFlake sets where the flake collector reads this node's holders.
func (m *Metrics) SetFlake(stats func() []FlakeStat) {
	m.mu.Lock()
	m.flake = stats
	m.mu.Unlock()
}

var (
	nsLabel             = []string{"namespace"}
	descFlakeIssued     = prometheus.NewDesc("seqd_flake_ids_issued_total", "Flake ids this node issued, per namespace.", nsLabel, nil)
	descFlakeFenced     = prometheus.NewDesc("seqd_flake_fenced_total", "Worker grants this node found fenced (reclaimed or released under it).", nsLabel, nil)
	descFlakeWorkers    = prometheus.NewDesc("seqd_flake_workers_held", "Workers this node holds and may issue from.", nsLabel, nil)
	descFlakeCapacity   = prometheus.NewDesc("seqd_flake_worker_capacity", "Workers the namespace's layout has.", nsLabel, nil)
	descFlakeRange      = prometheus.NewDesc("seqd_flake_range_remaining_seconds", "Time left in this node's granted range before it must be extended.", nsLabel, nil)
	descFlakeLead       = prometheus.NewDesc("seqd_flake_borrow_lead_seconds", "How far this node's last ids ran ahead of its clock by borrowing later units.", nsLabel, nil)
	descFlakeRenew      = prometheus.NewDesc("seqd_flake_renew_seconds", "Round trip of this node's last worker renewal.", nsLabel, nil)
	descFlakeLifetime   = prometheus.NewDesc("seqd_flake_lifetime_remaining_seconds", "Time until the namespace's layout can express no more ids.", nsLabel, nil)
	descFlakeEntries    = prometheus.NewDesc("seqd_flake_entries_total", "Flake entries (grants, renewals, releases) this node committed as leader: one per holder per renewal period, whatever the id rate.", nil, nil)
	descFlakeLeaderSkew = prometheus.NewDesc("seqd_flake_leader_clock_skew_seconds", "On the leader: the largest distance between its wall clock and a voter's, as last read.", nil, nil)
)

// Source is what the node collector reads of a running server
// (*cluster.Node is one): its status, and on a leader the skew between
// its wall clock and the voters'.
type Source interface {
	Status() cluster.LocalStatus
	ClockSkew() time.Duration
}

// SetNode points the node collector at n (set once the node has started).
func (m *Metrics) SetNode(n Source) {
	m.mu.Lock()
	m.node = n
	m.mu.Unlock()
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// ObserveRaise records one raise entry; it fits sections.Options.OnRaise.
func (m *Metrics) ObserveRaise(marks int, took time.Duration, err error) {
	if err != nil {
		m.raises.WithLabelValues("error").Inc()
		return
	}
	m.raises.WithLabelValues("ok").Inc()
	m.marks.Add(float64(marks))
	m.raiseTime.Observe(took.Seconds())
}

// NextAnswered counts and times one NextStream message this node answered,
// on either transport, as one Next call (code 0: values), and the values
// it issued itself; it fits api.WithStreamAnswers. The interceptor counts
// the stream as a whole once, under NextStream.
func (m *Metrics) NextAnswered(code connect.Code, issued int, took time.Duration) {
	if code == 0 {
		m.nextOK.Inc()
	} else {
		m.rpcs.WithLabelValues(seqv1connect.SequenceServiceNextProcedure, code.String()).Inc()
	}
	m.nextTime.Observe(took.Seconds())
	if issued > 0 {
		m.nextIssued.Add(float64(issued))
	}
}

// Interceptor counts and times every RPC, and counts the values issued by
// Next and Reserve calls served on this node.
func (m *Metrics) Interceptor() connect.Interceptor { return interceptor{m} }

type interceptor struct{ m *Metrics }

func (i interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := time.Now()
		resp, err := next(ctx, req)
		i.observe(req.Spec().Procedure, start, err)
		if err == nil && resp != nil && resp.Header().Get(ServedByHeader) != "" {
			switch r := resp.Any().(type) {
			case *seqv1.NextResponse:
				i.m.issued.WithLabelValues("next").Add(float64(len(r.GetValues())))
			case *seqv1.ReserveResponse:
				i.m.issued.WithLabelValues("reserve").Add(float64(r.GetCount()))
			}
		}
		return resp, err
	}
}

func (i interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		err := next(ctx, conn)
		i.observe(conn.Spec().Procedure, start, err)
		return err
	}
}

func (i interceptor) observe(procedure string, start time.Time, err error) {
	code := "ok"
	if err != nil {
		code = connect.CodeOf(err).String()
		var ce *connect.Error
		if !errors.As(err, &ce) {
			code = connect.CodeUnknown.String()
		}
	}
	i.m.rpcs.WithLabelValues(procedure, code).Inc()
	i.m.rpcTime.WithLabelValues(procedure).Observe(time.Since(start).Seconds())
}

// nodeCollector reads the node's state at scrape time.
type nodeCollector struct{ m *Metrics }

var (
	descServing       = prometheus.NewDesc("seqd_serving", "1 while this node is the leader and holds the lease.", nil, nil)
	descLeader        = prometheus.NewDesc("seqd_is_leader", "1 while raft considers this node the leader.", nil, nil)
	descLease         = prometheus.NewDesc("seqd_lease_remaining_seconds", "How long the leader lease still runs.", nil, nil)
	descRenewals      = prometheus.NewDesc("seqd_lease_renewals_total", "Lease renewals committed.", nil, nil)
	descRenewalErrors = prometheus.NewDesc("seqd_lease_renewal_errors_total", "Lease renewals that failed.", nil, nil)
	descLeaderChanges = prometheus.NewDesc("seqd_leader_changes_total", "Leadership gains and losses seen by this node.", nil, nil)
	descFailover      = prometheus.NewDesc("seqd_last_failover_seconds", "Last time this node became leader: from winning the election to serving.", nil, nil)
	descKeys          = prometheus.NewDesc("seqd_keys_held", "Keys held in the allocator's memory.", nil, nil)
	descSections      = prometheus.NewDesc("seqd_sections_held", "Sections loaded in the allocator's memory.", nil, nil)
	descTerm          = prometheus.NewDesc("seqd_raft_term", "Current raft term.", nil, nil)
	descApplied       = prometheus.NewDesc("seqd_raft_applied_index", "Last raft index applied to the FSM.", nil, nil)
	descVoter         = prometheus.NewDesc("seqd_voter", "1 while this node votes in the raft configuration.", nil, nil)
	descRaftOpen      = prometheus.NewDesc("seqd_raft_open", "1 once this node is admitted in every group and takes raft traffic; 0 while it refuses it (not admitted yet, or wiped, an older copy, removed, taken for another cluster's member, or fenced: seqd_group_admission says which).", nil, nil)
	descDiskFull      = prometheus.NewDesc("seqd_disk_full", "1 while a write found the disk full and none succeeded since (the node stands for no election).", nil, nil)
	descDiskFullWr    = prometheus.NewDesc("seqd_disk_full_writes_total", "Writes (raft log, term and vote, state machine) that found the disk full.", nil, nil)
	descLeaseWait     = prometheus.NewDesc("seqd_lease_wait_seconds", "What this node waited from its last election before serving: the longer of its lease and the recorded one, plus a margin.", nil, nil)
	descTaken         = prometheus.NewDesc("seqd_values_taken_total", "Values this node's allocator took as leader: those calls returned and those of calls that failed after taking them (gaps). Bounds --values-since for seqd restore.", nil, nil)
	descProtocol      = prometheus.NewDesc("seqd_protocol", "The cluster's replicated-command protocol as this node knows it.", nil, nil)

	// Per raft group (the unlabelled series above describe group 0, and
	// count values, keys and sections over all groups). hashicorp/raft's
	// own metrics (seqd_raft_* from go-metrics) are process-global: every
	// group's raft adds into the same series.
	groupLabel         = []string{"group"}
	descGroups         = prometheus.NewDesc("seqd_groups", "Raft groups this node runs (fixed when the cluster was bootstrapped).", nil, nil)
	descGroupServing   = prometheus.NewDesc("seqd_group_serving", "1 while this node leads the group and holds its lease.", groupLabel, nil)
	descGroupLeader    = prometheus.NewDesc("seqd_group_is_leader", "1 while raft considers this node the group's leader.", groupLabel, nil)
	descGroupTerm      = prometheus.NewDesc("seqd_group_raft_term", "The group's raft term on this node.", groupLabel, nil)
	descGroupApplied   = prometheus.NewDesc("seqd_group_raft_applied_index", "Last raft index of the group applied to its FSM on this node.", groupLabel, nil)
	descGroupTaken     = prometheus.NewDesc("seqd_group_values_taken_total", "Values this node's allocator of the group took as its leader.", groupLabel, nil)
	descGroupPreferred = prometheus.NewDesc("seqd_group_preferred_leader", "1 while this node is the group's preferred leader (leaders are balanced towards it).", groupLabel, nil)
	descBalanceMoves   = prometheus.NewDesc("seqd_balance_moves_total", "Leadership transfers this node's balancer and drains started (moves of a group to its preferred leader, or off a drained node).", nil, nil)
	descGroupRaftOpen  = prometheus.NewDesc("seqd_group_raft_open", "1 once this node is admitted in the group (it takes part in its raft); 0 while it refuses the group's raft traffic (not yet admitted, or its copy of the group wiped or older: seqd_group_admission says why).", groupLabel, nil)
	descGroupAdmission = prometheus.NewDesc("seqd_group_admission", "1 for the kind of the last admission verdict about the group on this node (cluster/admit: leader, majority, answers, quorum-wait, stale, wiped, superseded, ...).", []string{"group", "kind"}, nil)
	descFenced         = prometheus.NewDesc("seqd_fenced", "1 once this node is fenced for good: a newer generation of its cluster (a restore) has served, and it never serves again.", nil, nil)
)

func (c nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descServing, descLeader, descLease, descRenewals, descRenewalErrors,
		descLeaderChanges, descFailover, descKeys, descSections, descTerm, descApplied, descVoter,
		descRaftOpen, descDiskFull, descDiskFullWr, descLeaseWait, descProtocol, descTaken,
		descFlakeIssued, descFlakeFenced, descFlakeWorkers, descFlakeCapacity, descFlakeRange, descFlakeLead,
		descFlakeRenew, descFlakeLifetime, descFlakeEntries, descFlakeLeaderSkew,
		descGroups, descGroupServing, descGroupLeader, descGroupTerm, descGroupApplied, descGroupTaken, descGroupPreferred, descGroupRaftOpen, descGroupAdmission, descFenced, descBalanceMoves} {
		ch <- d
	}
}

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	n := c.m.node
	c.m.mu.Unlock()
	if n == nil {
		return
	}
	st := n.Status()
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(descServing, b(st.Serving))
	gauge(descLeader, b(st.State == "Leader"))
	gauge(descLease, st.LeaseRemaining.Seconds())
	counter(descRenewals, float64(st.Renewals))
	counter(descRenewalErrors, float64(st.RenewalErrors))
	counter(descLeaderChanges, float64(st.LeaderChanges))
	gauge(descFailover, st.LastFailover.Seconds())
	gauge(descKeys, float64(st.KeysHeld))
	gauge(descSections, float64(st.SectionsHeld))
	gauge(descTerm, float64(st.Term))
	gauge(descApplied, float64(st.AppliedIndex))
	gauge(descVoter, b(st.Voter))
	gauge(descRaftOpen, b(st.RaftOpen))
	gauge(descFenced, b(st.Fenced))
	gauge(descDiskFull, b(st.DiskFull))
	counter(descDiskFullWr, float64(st.DiskFullWrites))
	gauge(descLeaseWait, st.LeaseWait.Seconds())
	gauge(descProtocol, float64(st.Protocol))
	counter(descTaken, float64(st.ValuesTaken))
	counter(descFlakeEntries, float64(st.FlakeEntries))
	gauge(descGroups, float64(len(st.Groups)))
	counter(descBalanceMoves, float64(st.BalanceMoves))
	for _, g := range st.Groups {
		l := strconv.Itoa(g.Group)
		ch <- prometheus.MustNewConstMetric(descGroupServing, prometheus.GaugeValue, b(g.Serving), l)
		ch <- prometheus.MustNewConstMetric(descGroupLeader, prometheus.GaugeValue, b(g.State == "Leader"), l)
		ch <- prometheus.MustNewConstMetric(descGroupTerm, prometheus.GaugeValue, float64(g.Term), l)
		ch <- prometheus.MustNewConstMetric(descGroupApplied, prometheus.GaugeValue, float64(g.AppliedIndex), l)
		ch <- prometheus.MustNewConstMetric(descGroupTaken, prometheus.CounterValue, float64(g.ValuesTaken), l)
		ch <- prometheus.MustNewConstMetric(descGroupPreferred, prometheus.GaugeValue, b(g.Preferred == st.ID), l)
		ch <- prometheus.MustNewConstMetric(descGroupRaftOpen, prometheus.GaugeValue, b(g.RaftOpen), l)
		if g.Admission != "" {
			ch <- prometheus.MustNewConstMetric(descGroupAdmission, prometheus.GaugeValue, 1, l, g.Admission)
		}
	}
	if st.State == "Leader" {
		gauge(descFlakeLeaderSkew, n.ClockSkew().Seconds())
	}
	c.m.mu.Lock()
	flake := c.m.flake
	c.m.mu.Unlock()
	if flake == nil {
		return
	}
	for _, f := range flake() {
		ch <- prometheus.MustNewConstMetric(descFlakeIssued, prometheus.CounterValue, float64(f.Issued), f.Namespace)
		ch <- prometheus.MustNewConstMetric(descFlakeFenced, prometheus.CounterValue, float64(f.Fenced), f.Namespace)
		for d, v := range map[*prometheus.Desc]float64{
			descFlakeWorkers: float64(f.Workers), descFlakeCapacity: float64(f.Capacity),
			descFlakeRange: f.RangeRemaining.Seconds(), descFlakeLead: f.Lead.Seconds(),
			descFlakeRenew: f.LastRenewal.Seconds(), descFlakeLifetime: f.LifetimeRemaining.Seconds(),
		} {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, f.Namespace)
		}
	}
}
