package wire

// Message types of SPEC 2.
const (
	TypeMetadata = "metadata"
	TypeInfer    = "infer"
	TypeAction   = "action"
	TypeFeedback = "feedback"
)

// The protocol's close reasons (SPEC 7) and features (SPEC 10), defined
// once for the client and for the servers of internal/.
const (
	// ReasonStop: the server ended the run; a client exits, never reconnects.
	ReasonStop = "plugrl-server-stop"
	// ReasonResync: the server dropped the connection to resynchronise; a
	// client reconnects and drops the feedback it owed (SPEC 7.2, 7.6).
	ReasonResync = "plugrl-server-resync"
	// ReasonFeedbackTimeout: the server waited too long for a feedback (SPEC 7.3).
	ReasonFeedbackTimeout = "Feedback timeout"
	// ReasonInternalError goes with close code 1011 (SPEC 7.4).
	ReasonInternalError = "Internal server error."
	// ReasonKeepaliveTimeout goes with close code 1011 too, but is not the
	// server failing: it is the Python websockets library (which PlugRL
	// servers run on) dropping a client that left its pings unanswered
	// (ping_timeout, 20 s by default). The client was stopped (a debugger,
	// SIGSTOP) or could not run; a client reconnects, as the reference
	// client does.
	ReasonKeepaliveTimeout = "keepalive ping timeout"
	// FeatureReuse: infer may reuse an env's last fed-back observation (SPEC 10.1).
	FeatureReuse = "reuse-feedback-obs"
)
