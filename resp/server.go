package resp

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
)

// Backend serves the sequence calls: api.Sequences in a seqd server. Each
// method may be called by many connections at once; it coalesces them (per
// space and raft group), routes them (any server answers) and retries
// unavailable errors itself. Errors are Connect errors (*connect.Error).
type Backend interface {
	// Next takes the next value of each key, in the keys' order; errs is
	// nil when every key has its value, else errs[i] is key i's error.
	// keys is the caller's again once a method returns: it is not kept.
	Next(ctx context.Context, space string, keys []uint64) (vals []uint64, errs []error)
	// Current returns each key's current value, as Next returns values.
	Current(ctx context.Context, space string, keys []uint64) (vals []uint64, errs []error)
	// Reserve takes count consecutive values of key and returns the first.
	Reserve(ctx context.Context, space string, key, count uint64) (uint64, error)
}

// Info is what INFO and HELLO report about the server.
type Info struct {
	NodeID    string
	ClusterID string
	Version   string // seqd's build (a VCS revision), or "dev"
	// Leads lists the raft groups this server leads (INFO's
	// seqd_leads_groups).
	Leads []int
	// Groups is the cluster's raft group count.
	Groups int
}

// Config configures a Server.
type Config struct {
	// Backend serves the sequence commands (required).
	Backend Backend
	// Token, when set, must be given with AUTH (or HELLO ... AUTH) before
	// any command other than AUTH, HELLO, QUIT: the sequence token of
	// seqd serve --token-sequence.
	Token string
	// Info reports the server (INFO, HELLO); nil reports nothing beyond
	// the protocol.
	Info func() Info
	// MaxCommandBytes bounds the bytes of one command, or of an incomplete
	// one being read (default 1 MiB); a client that sends more gets an
	// error and is disconnected.
	MaxCommandBytes int
	// WriteTimeout bounds how long a connection's replies may wait for the
	// client to read them (default 30 s); past it the connection closes.
	WriteTimeout time.Duration
	// MaxConns bounds the open connections (default 10,000); past it a new
	// connection is told so and closed.
	MaxConns int
	// Logger receives the front end's log lines (default slog.Default()).
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultMaxCommandBytes = 1 << 20
	DefaultWriteTimeout    = 30 * time.Second
	DefaultMaxConns        = 10000
	// maxRunKeys bounds the keys of one call to the Backend; a longer run
	// of INCRs (or GETs) from one read is cut into calls made one after the
	// other.
	maxRunKeys = 1000
)

// Server serves RESP on one listener.
type Server struct {
	cfg  Config
	log  *slog.Logger
	ln   *limitListener
	done chan struct{}
	err  error

	conns  atomic.Int64
	nextID atomic.Int64

	closeOnce sync.Once
}

// connState is one connection's state (redcon's conn context).
type connState struct {
	id     int64
	ctx    context.Context // canceled when the connection closes
	cancel context.CancelFunc
	authed bool
	proto  int // 2 or 3 (HELLO)
	name   string
	lc     *limitConn
	spaces spaceCache       // the last space named (parseKey)
	cmds   []redcon.Command // a read's commands (handle), reused
	// Reused by every read (exec.go): its pending commands, its runs and
	// the keys of a run's Backend call.
	arena arena
	pend  []*pending
	keys  []uint64
}

// Serve serves RESP on ln until Close. It returns at once; the accept loop
// runs in its own goroutine.
func Serve(ln net.Listener, cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("resp: no backend")
	}
	if cfg.MaxCommandBytes <= 0 {
		cfg.MaxCommandBytes = DefaultMaxCommandBytes
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{cfg: cfg, log: log.With("component", "resp"), done: make(chan struct{})}
	s.ln = &limitListener{Listener: ln, max: cfg.MaxCommandBytes}
	go func() {
		s.err = redcon.Serve(s.ln, s.handle, s.accept, s.closed)
		close(s.done)
	}()
	return s, nil
}

// Addr returns the listener's address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops accepting and closes every connection (a command in flight
// finishes without its reply).
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		err = s.ln.Close()
		<-s.done
	})
	return err
}

func (s *Server) accept(c redcon.Conn) bool {
	lc, _ := c.NetConn().(*limitConn)
	if n := s.conns.Add(1); n > int64(s.cfg.MaxConns) {
		s.conns.Add(-1)
		if lc != nil {
			lc.writeNow("ERR max number of clients reached")
		}
		return false
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.SetContext(&connState{id: s.nextID.Add(1), ctx: ctx, cancel: cancel, proto: 2, authed: s.cfg.Token == "", lc: lc})
	return true
}

func (s *Server) closed(c redcon.Conn, err error) {
	if st, ok := c.Context().(*connState); ok {
		st.cancel()
		s.conns.Add(-1)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		s.log.Debug("connection closed", "remote", c.RemoteAddr(), "err", err)
	}
}

// handle runs the commands of one read: redcon calls it with the first,
// and the rest of the pipeline is taken at once so that they are executed
// together (exec.go). redcon flushes the replies when it returns; the write
// deadline bounds that flush.
func (s *Server) handle(c redcon.Conn, cmd redcon.Command) {
	st := c.Context().(*connState)
	if st.lc != nil {
		st.lc.commandRead()
		// The deadline of redcon's flush after this returns: counted from
		// then, not from now (the commands may take longer than it).
		defer func() { _ = st.lc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout)) }()
	}
	st.cmds = append(append(st.cmds[:0], cmd), c.ReadPipeline()...)
	s.exec(c, st, st.cmds)
	clear(st.cmds) // the commands' bytes are redcon's buffer's
}

// checkToken reports whether token is the configured one.
func (s *Server) checkToken(token []byte) bool {
	return s.cfg.Token != "" && subtle.ConstantTimeCompare(token, []byte(s.cfg.Token)) == 1
}

func (s *Server) info() Info {
	if s.cfg.Info == nil {
		return Info{Version: "dev"}
	}
	return s.cfg.Info()
}
