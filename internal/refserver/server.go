// Package refserver is a PlugRL training server written against SPEC 8.2,
// for tests and demos. It trains nothing: a Policy fills each action chunk
// (ZeroPolicy, or ProbePolicy's position-encoding values of SPEC 8.1). It
// serves many clients at once, one goroutine per connection, keeps env
// indices connection-scoped, closes a connection with 1001
// "plugrl-server-resync" on any protocol error while serving the others,
// implements reuse-feedback-obs when configured, ends the run with 1001
// "plugrl-server-stop", and can inject the faults of Faults.
//
// It is deliberately strict, as a test peer: it closes with a resync on some
// messages SPEC only tolerates, step_ids that are not an integer array of
// length n (SPEC 5.2 validates them for presence only) and keys SPEC does
// not define inside data and the observation, so that a client under test
// hears of them.
package refserver

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"
	"github.com/tinylib/msgp/msgp"

	"github.com/plugrl/libplugrl/core/wire"
)

// The close reasons and other constants of SPEC 7 and 10.1.
const (
	StopReason              = wire.ReasonStop
	ResyncReason            = wire.ReasonResync
	FeedbackTimeoutReason   = wire.ReasonFeedbackTimeout
	InternalErrorReason     = wire.ReasonInternalError
	FeatureReuseFeedbackObs = wire.FeatureReuse

	// ServerName and Version are metadata's server and server_version.
	ServerName = "plugrl-refserver"
	Version    = "0.1.0"

	// DefaultFeedbackTimeout is SPEC 7.3's FEEDBACK_WAIT_TIMEOUT.
	DefaultFeedbackTimeout = 60 * time.Second
	// DefaultMaxLog is how many received messages Stats keeps by default.
	DefaultMaxLog = 100000
	// DefaultMaxMessage is the largest message a server takes by default:
	// 256 MiB, fifty times a 16-env batch of two 224x224 RGB cameras.
	DefaultMaxMessage = 256 << 20
	// DefaultMaxConns is how many connections a server serves at once by
	// default: far more than a test or a demo opens, few enough that idle
	// connections cost tens of megabytes at most.
	DefaultMaxConns = 1024
)

// connBuffer is the size of each connection's read and write buffers. Small:
// an idle connection should cost little, and a large message bypasses them
// (bufio reads and writes past a buffer's size go straight to the socket).
const connBuffer = 4 << 10

// closeGrace bounds the closing handshake: how long a connection waits for
// the peer's close frame after sending its own.
const closeGrace = 2 * time.Second

// MaxRefusing bounds the refusals with HTTP 503 under way at once. Each
// waits up to closeGrace for a request to answer, so a flood of
// connections past MaxConns would otherwise hold a goroutine and a socket
// each for that long, bounded only by the flood's rate; past MaxRefusing a
// connection is closed at once, unanswered (Stats.Cut).
const MaxRefusing = 64

// Config configures a Server. The zero value is a server with H = 8, da = 7,
// <f4 actions, ZeroPolicy, no features and no faults, that never stops.
type Config struct {
	// Horizon (H) and ActionDim (da): each action is [H, n, da]. Zero means 8
	// and 7.
	Horizon, ActionDim int
	// ActionDType is the action's dtype, any numeric one in either byte
	// order (a big-endian one tests a client's byte swapping). The zero
	// value means <f4.
	ActionDType wire.DType
	// StopAfter, when positive, ends the run once this many exchanges have
	// completed across all connections: every connection is closed with
	// 1001 "plugrl-server-stop", and a client connecting afterwards gets
	// metadata and the same close.
	StopAfter int
	// Features are listed in metadata's features. "reuse-feedback-obs" is
	// implemented; any other name is listed but means nothing here (a client
	// must ignore features it does not know).
	Features []string
	// Policy fills the action chunks; nil means ZeroPolicy.
	Policy Policy
	// Faults injects failures, for tests.
	Faults Faults
	// OmitEnvIDs sends actions without env_ids, as the Ray dialect of SPEC
	// 5.3 does.
	OmitEnvIDs bool
	// ExtraMetadata is merged over the top of the metadata (SPEC 5.1): any
	// value msgp.AppendIntf encodes (strings, ints, []string, maps,
	// msgp.Raw, ...). Keys are written in sorted order.
	ExtraMetadata map[string]any
	// FeedbackTimeout is how long the server waits for a feedback after an
	// action before closing with 1001 "Feedback timeout" (SPEC 7.3). Zero
	// means 60 s. It also bounds each write.
	FeedbackTimeout time.Duration
	// MaxConns bounds the connections open at once, counting those in their
	// handshake; zero means DefaultMaxConns, negative no limit. One more is
	// refused in its handshake with HTTP 503 Service Unavailable, so it
	// never becomes a WebSocket connection and SPEC 8.2's metadata-first
	// rule still holds for every connection there is; past MaxRefusing
	// refusals under way, it is closed at once, unanswered.
	MaxConns int
	// MaxMessage bounds a message's size in bytes, its fragments together;
	// zero means DefaultMaxMessage, negative no limit. A client whose
	// message grows past it is closed with 1009 (message too big) as soon
	// as a frame header says so, before its bytes are read. It bounds the
	// actions the server sends too: an infer whose action would be larger
	// (H * n * da elements, and n env_ids) is closed with 1009 before the
	// chunk is made. So the server's memory per connection stays within
	// about twice MaxMessage.
	MaxMessage int64
	// TLS, when set, makes the server speak wss://: every connection is a
	// TLS server connection with this configuration (its certificates), and
	// Listen's URL says wss. The TLS handshake happens within the WebSocket
	// handshake's deadline.
	TLS *tls.Config
	// MaxLog bounds Stats.Received; zero means DefaultMaxLog, negative
	// keeps nothing. Counts are kept regardless.
	MaxLog int
	// EpisodeLog, when set, receives an episode log in the columns of
	// plugrl-bridges' (CSV: step,slot,episode,return,length, then conn),
	// but not its meaning: slot is the env index, kept apart per connection
	// while connections overlap and carried to the next connection that
	// uses it when one ends (a client's reconnect), and length is
	// info.episode.l when the client sends it, else the number of chunks
	// fed back (see episodes.go). To compare with one client's ledger
	// (plugrl ledger compare), reconnects included.
	EpisodeLog io.Writer
	// Logf, when set, receives one line per notable event: connections,
	// closes and why, feedback for envs with no outstanding action.
	Logf func(format string, args ...any)
}

// Stats is a snapshot of what the server has seen. Slices are copies.
type Stats struct {
	Connections  int  // WebSocket handshakes completed
	Open         int  // connections open now
	Infers       int  // infers accepted: the latest exchange number
	Actions      int  // actions sent
	Exchanges    int  // exchanges completed (a feedback received after an action)
	FeedbackRows int  // env rows in accepted feedback messages
	ReusedRows   int  // infer rows taken from the reuse cache (SPEC 10.1)
	Orphans      int  // feedback rows naming an env with no outstanding action on their connection (SPEC 7.6)
	Resyncs      int  // connections closed with plugrl-server-resync
	Refused      int  // connections refused with HTTP 503: MaxConns were open
	Cut          int  // connections closed at once, unanswered: MaxConns were open and MaxRefusing refusals under way
	Stopped      bool // the run has ended (StopAfter reached, or Stop called)
	// Received lists every message received, in order of arrival (up to
	// Config.MaxLog of them; LogDropped counts the rest).
	Received   []Received
	LogDropped int
	// Closes lists how each connection ended, in order: the first
	// MaxCloses of them (ClosesDropped counts the rest), so that a long
	// run under connection churn keeps bounded memory.
	Closes        []Closed
	ClosesDropped int
}

// MaxCloses bounds Stats.Closes: about 100 bytes each, 10 MB in all (a
// variable for tests).
var MaxCloses = 100000

// Received is one message a client sent.
type Received struct {
	Conn int // connection number, from 1, in handshake order
	// Type is the message_type, or "text-frame" for a text frame, or
	// "undecodable" when no message_type could be read.
	Type string
	// Exchange is the exchange number of an accepted infer, and of the
	// accepted feedback that completes it; 0 otherwise.
	Exchange   int
	EnvIndices []int64 // as sent, when they could be decoded
	StepIDs    []int64
	Reuse      []bool    // an infer's reuse flags, if any
	Rewards    []float64 // a feedback's
	Terminated []bool
	Truncated  []bool
	// Orphans are a feedback's env indices that had no action outstanding
	// on this connection (SPEC 7.6: its action came from an earlier
	// connection, or never).
	Orphans []int64
	// Refused says why the server refused the message; empty if accepted.
	Refused string
}

// Closed is how one connection ended.
type Closed struct {
	Conn int
	// By is "server" or "client": who ended the connection first.
	By string
	// Code and Reason are the close frame's; Code is 0 when the connection
	// ended with no close frame (a drop, a fault, a client that vanished).
	Code   int
	Reason string
	Detail string // why, in words
}

// Server is a reference PlugRL training server.
type Server struct {
	cfg      Config
	policy   Policy
	metadata []byte
	features map[string]bool

	mu    sync.Mutex
	ln    net.Listener
	conns map[int]*conn
	// shaking holds the accepted connections still in their WebSocket
	// handshake, so that Close can cut them instead of waiting out the
	// handshake's deadline.
	shaking map[net.Conn]bool
	// refusing counts the refusals (HTTP 503) under way: MaxRefusing at
	// most, each for closeGrace at most.
	refusing int
	// admitted counts connections accepted and not yet ended, in their
	// handshake or open: what MaxConns bounds.
	admitted int
	nextID   int
	stats    Stats
	closed   bool
	done     chan struct{} // closed when the run stops
	quit     chan struct{} // closed by Close
	wg       sync.WaitGroup

	episodes  *episodeLog // nil without Config.EpisodeLog
	infers    atomic.Int64
	exchanges atomic.Int64
	stopOnce  sync.Once
}

// New returns a server for cfg. Nothing is served until Listen.
func New(cfg Config) *Server {
	if cfg.Horizon == 0 {
		cfg.Horizon = 8
	}
	if cfg.ActionDim == 0 {
		cfg.ActionDim = 7
	}
	if cfg.ActionDType == (wire.DType{}) {
		cfg.ActionDType = wire.Float32
	}
	if cfg.FeedbackTimeout <= 0 {
		cfg.FeedbackTimeout = DefaultFeedbackTimeout
	}
	if cfg.MaxLog == 0 {
		cfg.MaxLog = DefaultMaxLog
	}
	if cfg.MaxMessage == 0 {
		cfg.MaxMessage = DefaultMaxMessage
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	s := &Server{
		cfg:      cfg,
		policy:   cfg.Policy,
		features: make(map[string]bool),
		conns:    make(map[int]*conn),
		shaking:  make(map[net.Conn]bool),
		done:     make(chan struct{}),
		quit:     make(chan struct{}),
	}
	if s.policy == nil {
		s.policy = ZeroPolicy{}
	}
	if cfg.EpisodeLog != nil {
		s.episodes = newEpisodeLog(cfg.EpisodeLog)
	}
	for _, f := range cfg.Features {
		s.features[f] = true
	}
	return s
}

// Config returns the configuration in use, defaults filled in.
func (s *Server) Config() Config { return s.cfg }

func (s *Server) check() error {
	c := &s.cfg
	if c.Horizon < 1 || c.ActionDim < 1 {
		return fmt.Errorf("refserver: horizon %d and action dim %d must be positive", c.Horizon, c.ActionDim)
	}
	if !c.ActionDType.Numeric() {
		return fmt.Errorf("refserver: action dtype %s is not numeric", c.ActionDType)
	}
	if _, err := wire.ByteLen(c.ActionDType, []int{c.Horizon + 1, 1, c.ActionDim}); err != nil {
		return fmt.Errorf("refserver: %v", err)
	}
	return nil
}

// encodeMetadata builds the metadata message: every key of SPEC 5.1, then
// ExtraMetadata over the top.
func (s *Server) encodeMetadata() error {
	algorithm, policy := describe(s.policy)
	features := append([]string{}, s.cfg.Features...)
	md := &wire.Metadata{
		ProtocolVersion: wire.Opt[int64]{Value: 1, Set: true},
		Server:          wire.Opt[string]{Value: ServerName, Set: true},
		ServerVersion:   wire.Opt[string]{Value: Version, Set: true},
		Algorithm:       wire.Opt[string]{Value: algorithm, Set: true},
		Policy:          wire.Opt[string]{Value: policy, Set: true},
		ActionHorizon:   wire.Opt[int64]{Value: int64(s.cfg.Horizon), Set: true},
		ActionDim:       wire.Opt[int64]{Value: int64(s.cfg.ActionDim), Set: true},
		Features:        wire.Opt[[]string]{Value: features, Set: true},
	}
	keys := make([]string, 0, len(s.cfg.ExtraMetadata))
	for k := range s.cfg.ExtraMetadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	extra := make([]wire.MetaKey, 0, len(keys))
	for _, k := range keys {
		v, err := msgp.AppendIntf(nil, s.cfg.ExtraMetadata[k])
		if err != nil {
			return fmt.Errorf("refserver: metadata key %q: %v", k, err)
		}
		extra = append(extra, wire.MetaKey{Key: k, Value: v})
	}
	var m wire.Message
	if err := wire.EncodeMetadata(&m, md, extra...); err != nil {
		return fmt.Errorf("refserver: %v", err)
	}
	s.metadata = m.AppendTo(nil)
	return nil
}

// Listen starts serving on addr ("127.0.0.1:0" picks a free port) in the
// background, and returns the URL clients connect to, ws://host:port
// (wss://host:port with Config.TLS). An unspecified host (0.0.0.0, ::) is
// reported as 127.0.0.1.
func (s *Server) Listen(addr string) (string, error) {
	if err := s.check(); err != nil {
		return "", err
	}
	if err := s.encodeMetadata(); err != nil {
		return "", err
	}
	s.mu.Lock()
	if s.ln != nil || s.closed {
		s.mu.Unlock()
		return "", errors.New("refserver: Listen called twice, or after Close")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.mu.Unlock()
		return "", err
	}
	scheme := "ws://"
	if s.cfg.TLS != nil {
		ln, scheme = tls.NewListener(ln, s.cfg.TLS), "wss://"
	}
	s.ln = ln
	s.wg.Add(1)
	s.mu.Unlock()
	go s.accept(ln)
	ta := ln.Addr().(*net.TCPAddr)
	host := ta.IP.String()
	if ta.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	url := scheme + net.JoinHostPort(host, strconv.Itoa(ta.Port))
	s.logf("listening on %s", url)
	return url, nil
}

func (s *Server) accept(ln net.Listener) {
	defer s.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-s.quit:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.logf("accept: %v", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		full := s.cfg.MaxConns > 0 && s.admitted >= s.cfg.MaxConns
		if full && s.refusing >= MaxRefusing {
			s.stats.Cut++
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.shaking[nc] = true
		s.wg.Add(1)
		if full {
			s.stats.Refused++
			s.refusing++
			s.mu.Unlock()
			go s.refuse(nc)
			continue
		}
		s.admitted++
		s.mu.Unlock()
		go s.serve(nc)
	}
}

// refuse answers a connection over MaxConns with HTTP 503 in place of the
// WebSocket upgrade, within closeGrace, asking the client to come back in
// a second (Retry-After), which libplugrl's clients heed.
func (s *Server) refuse(nc net.Conn) {
	defer s.wg.Done()
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(closeGrace))
	why := fmt.Sprintf("plugrl-refserver: serving %d connections, the most it serves at once (Config.MaxConns, plugrl serve --max-conns)", s.cfg.MaxConns)
	_, err := (ws.Upgrader{OnRequest: func([]byte) error {
		return ws.RejectConnectionError(ws.RejectionStatus(503), ws.RejectionReason(why),
			ws.RejectionHeader(ws.HandshakeHeaderString("Retry-After: 1\r\n")))
	}}).Upgrade(nc)
	s.mu.Lock()
	delete(s.shaking, nc)
	s.refusing--
	s.mu.Unlock()
	s.logf("refused a connection from %s with HTTP 503: %d connections open (MaxConns): %v", nc.RemoteAddr(), s.cfg.MaxConns, err)
}

// Close stops accepting, closes every open connection with 1001 and no
// reason (going away: a client should reconnect, as to a restarted server),
// or with "plugrl-server-stop" once the run has stopped, and waits for the
// connections' goroutines to end. Connections still in their handshake are
// cut. A connection whose close frame cannot be written within closeGrace
// (its client is not reading) is cut too, so Close takes about closeGrace
// at most beyond each closing handshake's own closeGrace.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.quit)
	var err error
	if s.ln != nil {
		err = s.ln.Close()
	}
	for nc := range s.shaking {
		_ = nc.Close()
	}
	conns := s.openConns()
	s.mu.Unlock()
	reason, detail := s.goingAway()
	closeAll(conns, reason, detail)
	s.wg.Wait()
	return err
}

// goingAway is the close reason, and why in words, for a connection the
// server closes because it is closing. After Stop, Close can race Stop's
// own closes to a connection (the CLI closes as soon as Done fires): it
// says the same thing, so a client always sees the stop.
func (s *Server) goingAway() (reason, detail string) {
	if s.stopped() {
		return StopReason, "run stopped"
	}
	return "", "server closed"
}

// Stop ends the run: every open connection is closed with 1001
// "plugrl-server-stop" (SPEC 7.1), and a client that connects afterwards
// gets metadata and the same close. The listener stays open until Close.
// Stop returns once every connection open at the call has been sent its
// close, or cut because it could not be written within closeGrace; one
// still before its metadata (the MetadataDelay fault) is only asked to
// close, which ends its delay: it sends metadata and the close on its own
// goroutine, after Stop has returned.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.stats.Stopped = true
		close(s.done)
		conns := s.openConns()
		s.mu.Unlock()
		s.logf("run stopped after %d exchanges", s.exchanges.Load())
		closeAll(conns, StopReason, "run stopped")
	})
}

// closeAll closes every connection of conns with 1001 and reason, all at
// once: one client that does not read holds its connection's write lock
// for up to FeedbackTimeout, and must not delay the others' closes.
func closeAll(conns []*conn, reason, detail string) {
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.closeFromOutside(1001, reason, detail)
		}()
	}
	wg.Wait()
}

// Done is closed when the run stops.
func (s *Server) Done() <-chan struct{} { return s.done }

func (s *Server) stopped() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// openConns lists the open connections; s.mu must be held.
func (s *Server) openConns() []*conn {
	out := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// Stats returns a snapshot of the server's counters and logs.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Open = len(s.conns)
	st.Infers = int(s.infers.Load())
	st.Exchanges = int(s.exchanges.Load())
	st.Received = append([]Received(nil), s.stats.Received...)
	st.Closes = append([]Closed(nil), s.stats.Closes...)
	return st
}

// lastConn is the number of the latest connection.
func (s *Server) lastConn() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextID
}

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

// record appends a received message to the log.
func (s *Server) record(r Received) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.MaxLog < 0 || len(s.stats.Received) >= s.cfg.MaxLog {
		s.stats.LogDropped++
		return
	}
	s.stats.Received = append(s.stats.Received, r)
}

func (s *Server) count(f func(st *Stats)) {
	s.mu.Lock()
	f(&s.stats)
	s.mu.Unlock()
}
