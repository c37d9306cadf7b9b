package history

// The attempts of an operation: what they are, and how the format (version 2) stores them.

import "encoding/binary"

// Attempt is one attempt of an operation to reach etcd, as the client's transport saw it. Start and End
// are nanoseconds since the run's base time, as an operation's Call and Return.
type Attempt struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Code is the gRPC status code the attempt ended with ("DeadlineExceeded", "Unavailable", ...); "" when
	// it was answered. Error is the status message.
	Code  string `json:"code,omitempty"`
	Error string `json:"error,omitempty"`
	// Peer is the address of the member the attempt went to, when it got that far.
	Peer string `json:"peer,omitempty"`
	// NotSent: the attempt ended before its request was handed to a connection (no connection was ready,
	// the deadline passed first): etcd cannot have seen it.
	NotSent bool `json:"not_sent,omitempty"`
	// Transparent: gRPC made this attempt by itself, because the one before provably did not reach the
	// server's application (a refused stream, a stream above a GOAWAY's last, a connection that closed
	// before the request was written).
	Transparent bool `json:"transparent,omitempty"`
}

// Sends returns how many of attempts etcd may have received and processed: every attempt handed to a
// connection, except one that gRPC retried transparently (gRPC does so only for an attempt the server
// provably did not process).
func Sends(attempts []Attempt) int {
	n := 0
	for i, a := range attempts {
		if a.NotSent || (i+1 < len(attempts) && attempts[i+1].Transparent) {
			continue
		}
		n++
	}
	return n
}

// Failed reports whether the attempt ended without an answer.
func (a *Attempt) Failed() bool { return a.Code != "" }

// Flags of an operation record, after its request: what follows it.
const (
	opResponse         = 1
	opError            = 2
	opAttemptsRecorded = 4 // version 2: the client watched the operation's attempts
	opAttempts         = 8 // version 2: the attempts follow
)

// Flags of an encoded attempt.
const (
	atNotSent = 1 << iota
	atTransparent
	atCode
	atError
	atPeer
)

// attempts appends op's attempts: a count, then each as a flags byte, its start from the operation's call,
// its length, and its interned code, message and peer when it has them.
func (e *encoder) attempts(b []byte, op *Operation) []byte {
	b = binary.AppendUvarint(b, uint64(len(op.Attempts)))
	for i := range op.Attempts {
		a := &op.Attempts[i]
		var f byte
		for bit, set := range []bool{a.NotSent, a.Transparent, a.Code != "", a.Error != "", a.Peer != ""} {
			if set {
				f |= 1 << bit
			}
		}
		b = append(b, f)
		b = binary.AppendVarint(b, a.Start-op.Call)
		b = binary.AppendVarint(b, a.End-a.Start)
		for _, s := range []string{a.Code, a.Error, a.Peer} {
			if s != "" {
				b = e.s(b, s)
			}
		}
	}
	return b
}

// attempts reads the attempts of an operation called at call (see encoder.attempts).
func (d *decoder) attempts(call int64) []Attempt {
	as := d.attemptSlab.slice(d.count())
	for i := range as {
		a := &as[i]
		f := d.byte()
		a.NotSent, a.Transparent = f&atNotSent != 0, f&atTransparent != 0
		a.Start = call + d.varint()
		a.End = a.Start + d.varint()
		for bit, s := range []*string{&a.Code, &a.Error, &a.Peer} {
			if f&(atCode<<bit) != 0 {
				*s = d.s()
			}
		}
	}
	return as
}
